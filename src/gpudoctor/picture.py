"""A grid as an SVG heatmap (torch across, MAX down), for a sweep's grid and the matrix README.

Plain SVG 1.1 with no script and no external reference; every label is XML-escaped.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape


class TileKind(str, enum.Enum):
    PASS = "pass"
    PROBLEM = "problem"
    UNRESOLVABLE = "unresolvable"
    BUILD_FAILED = "build-failed"
    INTERRUPTED = "interrupted"


_COLOURS = {
    TileKind.PASS: ("#2e7d32", "#ffffff"),
    TileKind.PROBLEM: ("#c62828", "#ffffff"),
    TileKind.UNRESOLVABLE: ("#9e9e9e", "#000000"),
    TileKind.BUILD_FAILED: ("#6d4c41", "#ffffff"),
    TileKind.INTERRUPTED: ("#f9a825", "#000000"),
}
_CELL_W, _CELL_H, _LEFT, _TOP, _FONT = 150, 34, 90, 70, 11


@dataclass(frozen=True)
class Tile:
    kind: TileKind
    label: str  # a few words shown in the tile
    title: str = ""  # the longer text shown on hover


def heatmap_svg(title: str, xs: Sequence[str], ys: Sequence[str], tiles: Mapping[tuple[str, str], Tile]) -> str:
    """``tiles[(x, y)]`` for x in ``xs`` (columns: torch) and y in ``ys`` (rows: MAX); absent tiles stay empty."""
    width = _LEFT + _CELL_W * max(1, len(xs)) + 10
    height = _TOP + _CELL_H * max(1, len(ys)) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="{_FONT}">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<text x="{_LEFT}" y="42" font-weight="bold">torch</text>',
        f'<text x="10" y="{_TOP - 6}" font-weight="bold">MAX</text>',
    ]
    for i, x in enumerate(xs):
        out.append(f'<text x="{_LEFT + i * _CELL_W + 4}" y="{_TOP - 6}">{escape(x)}</text>')
    for j, y in enumerate(ys):
        top = _TOP + j * _CELL_H
        out.append(f'<text x="10" y="{top + _CELL_H // 2 + 4}">{escape(y)}</text>')
        for i, x in enumerate(xs):
            left = _LEFT + i * _CELL_W
            tile = tiles.get((x, y))
            if tile is None:
                out.append(
                    f'<rect x="{left}" y="{top}" width="{_CELL_W - 2}" height="{_CELL_H - 2}" '
                    'fill="#ffffff" stroke="#cccccc"/>'
                )
                continue
            fill, ink = _COLOURS[tile.kind]
            out.append(
                f"<g><title>{escape(tile.title or tile.label)}</title>"
                f'<rect x="{left}" y="{top}" width="{_CELL_W - 2}" height="{_CELL_H - 2}" fill="{fill}"/>'
                f'<text x="{left + 5}" y="{top + _CELL_H // 2 + 4}" fill="{ink}">{escape(_fit(tile.label))}</text></g>'
            )
    legend_y = height - 14
    for k, kind in enumerate(TileKind):
        fill, _ = _COLOURS[kind]
        out.append(f'<rect x="{10 + k * 120}" y="{legend_y - 10}" width="12" height="12" fill="{fill}"/>')
        out.append(f'<text x="{26 + k * 120}" y="{legend_y}">{kind.value}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _fit(label: str, limit: int = 24) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
