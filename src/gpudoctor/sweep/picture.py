"""A sweep's grid as an SVG heatmap."""

from __future__ import annotations

from gpudoctor.picture import Tile, TileKind, heatmap_svg
from gpudoctor.sweep.grid import CellResult, CellStatus
from gpudoctor.sweep.run import Grid

_KINDS = {
    CellStatus.HEALTHY: TileKind.PASS,
    CellStatus.PROBLEM: TileKind.PROBLEM,
    CellStatus.UNRESOLVABLE: TileKind.UNRESOLVABLE,
    CellStatus.BUILD_FAILED: TileKind.BUILD_FAILED,
    CellStatus.INTERRUPTED: TileKind.INTERRUPTED,
    CellStatus.LOST: TileKind.INTERRUPTED,
}


def _tile(result: CellResult) -> Tile:
    if result.status is CellStatus.HEALTHY:
        label = "pass"
    elif result.status is CellStatus.PROBLEM:
        label = ", ".join(result.findings) or f"{len(result.problems)} failing"
    else:
        label = result.status.value
    return Tile(_KINDS[result.status], label, f"{result.cell.key}: {result.reason}")


def grid_svg(grid: Grid) -> str:
    torches = list(dict.fromkeys(r.cell.torch for r in grid.results))
    maxes = list(dict.fromkeys(r.cell.max for r in grid.results))
    tiles = {(r.cell.torch, r.cell.max): _tile(r) for r in grid.results}
    pythons = sorted({r.cell.python for r in grid.results})
    return heatmap_svg(f"gpudoctor sweep (Python {', '.join(pythons)})", torches, maxes, tiles)
