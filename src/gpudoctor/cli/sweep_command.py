"""`gpudoctor sweep`: examine a grid of torch x MAX environments that it builds itself (with uv)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.cli.common import (
    OneLineParser,
    add_cell_source_arguments,
    cell_sources,
    existing_file,
    folder_to_write,
    positive_int,
    seconds,
    whole_number,
)
from gpudoctor.cli.kernel_command import add_call_arguments
from gpudoctor.errors import GpuDoctorError
from gpudoctor.process.session import stop_on_signals
from gpudoctor.safetext import safe_text

if TYPE_CHECKING:
    from gpudoctor.subject import Subject
    from gpudoctor.sweep.grid import Cell
    from gpudoctor.sweep.run import Grid


def build_parser() -> argparse.ArgumentParser:
    from gpudoctor.sweep.grid import DEFAULT_LINES

    parser = OneLineParser(
        prog="gpudoctor sweep",
        description="Build one environment per torch x MAX cell with uv (packages hardlinked from uv's cache), "
        "examine each with the doctor, and merge each cell's row into the matrix. Finished cells are kept: "
        "a rerun reuses them unless --refresh. Exit status: 0 every cell healthy, 1 a cell has a problem or "
        "could not be built, 2 usage error, 130/143 interrupted (finished cells are kept and shown).",
        epilog="Versions: 2.13.0 (exact), 2.6 (the newest 2.6.x), 25.3..26.7 (every release in between), "
        "comma-separated. Left out, torch or MAX is the newest release of each of its newest lines on the package "
        "index (pip's view: your pip configuration, plus --find-links; with --offline, the wheelhouses alone), "
        'asked at every sweep. Needs uv: pip install "gpudoctor[sweep]".',
    )
    grid = parser.add_argument_group("the grid")
    grid.add_argument("--torch", metavar="VERSIONS", help="torch versions, e.g. 2.6,2.9,2.13.0 (default: see --newest)")
    grid.add_argument(
        "--max", metavar="VERSIONS", help="MAX versions, e.g. 25.3..26.7 or 26.7.0,25.6.0 (default: see --newest)"
    )
    grid.add_argument("--grid", type=existing_file, metavar="FILE", help="a TOML file with torch = [...], max = [...]")
    grid.add_argument("--python", metavar="X.Y", help="the Python of every cell (default: this one's)")
    grid.add_argument(
        "--newest",
        type=whole_number(1, 100),
        default=DEFAULT_LINES,
        metavar="N",
        help=f"torch or MAX left out: the newest release of each of its N newest lines (default {DEFAULT_LINES})",
    )
    grid.add_argument("--dry-run", action="store_true", help="print the grid's cells and build nothing")
    kernel = parser.add_argument_group("your kernel in every cell (instead of the probes; no matrix rows)")
    kernel.add_argument("--kernel", type=Path, metavar="PATH", help="your Mojo package, as for gpudoctor kernel")
    add_call_arguments(kernel)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the grid as one JSON document")
    parser.add_argument("--svg", type=Path, metavar="FILE", help="also write the grid as an SVG picture")
    parser.add_argument(
        "--matrix", type=folder_to_write, metavar="DIR", help="the matrix to merge rows into (default ./matrix)"
    )
    parser.add_argument("--no-matrix", action="store_true", help="record nothing in the matrix")
    parser.add_argument("--envs", type=folder_to_write, metavar="DIR", help="where cell environments and results live")
    parser.add_argument(
        "--parallel",
        type=whole_number(1, 64),
        default=None,
        metavar="N",
        help="cells at once (default: one per 4 probe slots this machine has, at least 1)",
    )
    parser.add_argument("--jobs", "-j", type=positive_int, default=None, help="probes at once inside each cell")
    parser.add_argument("--only", metavar="ID", action="append", help="run only this probe (and what it needs)")
    parser.add_argument("--timeout", type=seconds, metavar="S", help="override every probe's timeout")
    parser.add_argument("--refresh", action="store_true", help="examine every cell again, even if kept")
    parser.add_argument(
        "--ray",
        action="store_true",
        help='spread the cells over a Ray cluster\'s nodes, one task per cell (pip install "gpudoctor[fleet]")',
    )
    parser.add_argument("--address", metavar="ADDR", help="with --ray: the head (default: as Ray resolves it)")
    add_cell_source_arguments(
        parser,
        "let cells use this interpreter's packages (a .pth after their own); a requirement it meets "
        "exactly is not installed again (like --system-site-packages, for any environment)",
    )
    return parser


def _subject(options: argparse.Namespace) -> Subject:
    """What every cell examines: the user's kernel package and its calls, checked as `gpudoctor kernel` checks
    them, or else the probes."""
    if options.kernel is None:
        if options.op or options.shape or options.dtype or options.param or options.spec:
            raise GpuDoctorError("--op, --shape, --dtype, --param and --spec go with --kernel PATH")
        from gpudoctor.subject import ProbeSuite

        return ProbeSuite(only=tuple(options.only) if options.only else None, timeout_s=options.timeout)
    from gpudoctor.cli.kernel_command import requests
    from gpudoctor.kernel.subject import KernelPackage

    return KernelPackage.load(options.kernel, requests(options), timeout_s=options.timeout)


def run(argv: Sequence[str]) -> int:
    from gpudoctor.sweep import grid as gridmod
    from gpudoctor.sweep.envs import default_envs_dir, default_python
    from gpudoctor.sweep.run import SweepEvent, SweepOptions, cell_label, sweep

    options = build_parser().parse_args(argv)
    spec: dict[str, object] = gridmod.load_grid_file(options.grid) if options.grid else {}
    python = options.python or spec.get("python") or default_python()
    assert isinstance(python, str)
    find_links, offline, inherit = cell_sources(options)
    releases = gridmod.release_lister(find_links, offline)
    versions: dict[str, list[str]] = {}
    for name in ("torch", "max"):
        given = getattr(options, name) if getattr(options, name) is not None else spec.get(name)
        assert given is None or isinstance(given, str | list)
        if given is not None:
            versions[name] = gridmod.expand_versions(given, name, releases)
            continue
        # Left out: the index's newest lines, asked now (a list in the code would fall behind the releases).
        versions[name] = gridmod.default_versions(name, releases, options.newest)
        sys.stderr.write(
            f"--{name} {','.join(versions[name])}: the newest release of each of its {options.newest} newest lines\n"
        )
    cells = tuple(gridmod.cells(versions["torch"], versions["max"], python))
    subject = _subject(options)
    if options.dry_run:
        _print_cells(cells, options.json)
        return 0
    matrix_dir = None
    if not options.no_matrix:
        from gpudoctor.matrix import default_matrix_dir

        matrix_dir = default_matrix_dir(options.matrix, writing=True)
    sweep_options = SweepOptions(
        cells=cells,
        envs_dir=(options.envs or default_envs_dir()).absolute(),
        subject=subject,
        matrix_dir=matrix_dir,
        parallel=options.parallel or 0,  # 0: SweepOptions picks what the machine allows
        probe_jobs=options.jobs or 0,
        refresh=options.refresh,
        inherit=inherit,
        find_links=find_links,
        offline=offline,
    )
    started = time.monotonic()
    done = 0

    def progress(event: SweepEvent) -> None:
        nonlocal done
        cell = f"torch {event.cell.torch} x max {event.cell.max}"
        elapsed = f"{time.monotonic() - started:6.0f} s"
        if event.step == "done" and event.result is not None:
            done += 1
            kept = " (kept from an earlier sweep)" if event.result.reused else ""
            line = f"[{done}/{len(cells)}] {elapsed}  {cell}: {cell_label(event.result)}{kept}"
        else:
            step = {"build": "building the environment", "examine": "examining"}.get(event.step, event.step)
            line = f"[{done}/{len(cells)}] {elapsed}  {cell}: {step} ..."
        sys.stderr.write(safe_text(line) + "\n")
        sys.stderr.flush()

    with stop_on_signals() as session:  # still in place while the grid is printed: a second Ctrl-C cuts nothing
        if options.ray:
            from gpudoctor.fleet.sweep_remote import sweep_on_ray

            grid = sweep_on_ray(sweep_options, options.address, on_event=progress, cancel=session.scope)
        else:
            grid = sweep(sweep_options, on_event=progress, cancel=session.scope)
        _print_grid(grid, options, matrix_dir, sweep_options.envs_dir)
    if session.stopped:
        sys.stderr.write(session.note("finished cells are kept"))
    return session.exit_status(grid.exit_code)


def _print_cells(cells: Sequence[Cell], as_json: bool) -> None:
    """--dry-run: the cells a sweep would build, in grid order."""
    if as_json:
        sys.stdout.write(json.dumps({"cells": [cell.to_dict() for cell in cells]}, indent=2) + "\n")
    else:
        for cell in cells:
            sys.stdout.write(safe_text(f"torch {cell.torch} x max {cell.max} (python {cell.python})") + "\n")
        sys.stdout.write(f"{len(cells)} cells; nothing built (--dry-run)\n")
    sys.stdout.flush()


def _print_grid(grid: Grid, options: argparse.Namespace, matrix_dir: Path | None, envs_dir: Path) -> None:
    from gpudoctor.sweep.grid import CellStatus
    from gpudoctor.sweep.run import cell_table

    if options.svg is not None:
        from gpudoctor.atomic import atomic_write
        from gpudoctor.sweep.picture import grid_svg

        atomic_write(options.svg, grid_svg(grid), mode=0o644)
    if options.json:
        sys.stdout.write(json.dumps(grid.to_dict(), indent=2) + "\n")
    else:
        table = cell_table(grid)
        widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
        for line in table:
            sys.stdout.write(safe_text("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip()) + "\n")
        for result in grid.results:
            if result.reason and result.status in (CellStatus.UNRESOLVABLE, CellStatus.BUILD_FAILED):
                first = result.reason.splitlines()[0] if result.reason else ""
                sys.stdout.write(safe_text(f"  {result.cell.key}: {result.status.value}: {first}") + "\n")
        if matrix_dir is not None:
            sys.stdout.write(f"rows merged into {matrix_dir}; cells and reports in {envs_dir}\n")
    sys.stdout.flush()
