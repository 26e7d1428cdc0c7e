"""Running a bisect: the search's cells examined as sweep cells (uv environments, kept results, ``--parallel``,
``--ray``), until the search is done or the session is stopped; then what it found, as data every face renders."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpudoctor import __version__
from gpudoctor.errors import GpuDoctorError
from gpudoctor.process.cancel import CancelScope
from gpudoctor.redact import redact_text
from gpudoctor.report.codec import decode
from gpudoctor.reproducer.bisect import BisectSearch, Transition, Verdict, Way, transitions, way_of
from gpudoctor.reproducer.command import RUN_ID, Reproducer
from gpudoctor.reproducer.subject import UserCommand
from gpudoctor.sweep.grid import Cell, CellResult, CellStatus
from gpudoctor.sweep.run import MAX_KEPT_BYTES, Grid, SweepOptions
from gpudoctor.textfile import read_text


@dataclass(frozen=True)
class BisectOptions:
    reproducer: Reproducer
    torch: str
    max_versions: tuple[str, ...]  # oldest first
    python: str  # X.Y of the cells
    envs_dir: Path
    bad: str | None = None  # the release the user sees it fail on (default: the newest)
    scan: bool = False
    parallel: int = 1
    inherit: str | None = None
    find_links: tuple[Path, ...] = ()
    offline: bool = False
    refresh: bool = False
    ray: bool = False
    address: str | None = None

    @property
    def reference(self) -> int:
        if self.bad is None:
            return len(self.max_versions) - 1
        from packaging.version import InvalidVersion, Version

        try:
            return [Version(v) for v in self.max_versions].index(Version(self.bad))
        except (InvalidVersion, ValueError):
            raise GpuDoctorError(
                f"--bad {self.bad}: not a release of the range ({', '.join(self.max_versions)})"
            ) from None


@dataclass(frozen=True)
class Examined:
    """One cell the search examined: its release, how the reproducer ended, what that means for the search."""

    max: str
    way: Way
    verdict: Verdict
    summary: str
    findings: tuple[tuple[str, str], ...] = ()  # (id, title) of its problem findings
    report: str | None = None  # the cell's report, relative to the envs folder
    seconds: float = 0.0
    reused: bool = False


@dataclass(frozen=True)
class BisectReport:
    torch: str
    python: str
    command: str
    versions: tuple[str, ...]
    reference: str
    examined: tuple[Examined, ...]
    transitions: tuple[Transition, ...]
    seconds: float
    scan: bool = False
    interrupted: bool = False
    doctor_version: str = field(default=__version__)

    @property
    def exit_code(self) -> int:
        return 1 if any(e.verdict is not Verdict.GOOD for e in self.examined) else 0


def _examined(cell_result: CellResult, envs_dir: Path, search: BisectSearch, index: int) -> Examined:
    report = None
    if cell_result.report is not None:
        try:
            report = decode(json.loads(read_text(envs_dir / cell_result.report, MAX_KEPT_BYTES)))
        except (GpuDoctorError, ValueError, KeyError, TypeError):
            report = None
    way = way_of(report, cell_result.reason)
    search.record(index, way)
    result = report.result(RUN_ID) if report is not None else None
    findings = tuple((f.id, f.title) for f in report.findings if f.is_problem) if report else ()
    summary = result.summary if result is not None else cell_result.reason
    return Examined(search.versions[index], way, Verdict.NOT_BUILT, summary[:500], findings, cell_result.report,
                    cell_result.duration_s, cell_result.reused)  # fmt: skip


CellsRunner = Callable[[SweepOptions, CancelScope], Grid]


def _run_cells(options: BisectOptions) -> CellsRunner:
    if options.ray:
        from gpudoctor.fleet.sweep_remote import sweep_on_ray

        return lambda sweep_options, scope: sweep_on_ray(sweep_options, options.address, cancel=scope)
    from gpudoctor.sweep.run import sweep

    return lambda sweep_options, scope: sweep(sweep_options, cancel=scope)


def bisect(
    options: BisectOptions, *, on_event: Callable[[str], None] | None = None, cancel: CancelScope | None = None
) -> BisectReport:
    """Examine the cells the search asks for, round by round (``parallel`` at once), until it is done or stopped."""
    scope = cancel if cancel is not None else CancelScope()
    search = BisectSearch(options.max_versions, options.reference, scan=options.scan)
    run_cells = _run_cells(options)
    started = time.monotonic()
    examined: dict[int, Examined] = {}
    interrupted = False
    while not scope.cancelled and (picks := search.next(options.parallel)):
        cells = tuple(Cell(options.torch, options.max_versions[i], options.python) for i in picks)
        if on_event is not None:
            on_event("examining MAX " + ", ".join(c.max for c in cells))
        sweep_options = SweepOptions(
            cells=cells, envs_dir=options.envs_dir, matrix_dir=None, parallel=len(cells), probe_jobs=1,
            refresh=options.refresh, inherit=options.inherit, subject=UserCommand(options.reproducer),
            find_links=options.find_links, offline=options.offline,
        )  # fmt: skip
        grid = run_cells(sweep_options, scope)
        for index, cell_result in zip(picks, grid.results, strict=True):
            if cell_result.status is CellStatus.INTERRUPTED:
                interrupted = True
                continue
            examined[index] = _examined(cell_result, options.envs_dir, search, index)
            if on_event is not None:
                shown = examined[index]
                kept = " (kept from an earlier run)" if shown.reused else ""
                on_event(f"MAX {shown.max}: {shown.way.label}{kept}")
        interrupted = interrupted or grid.interrupted
    found = tuple(replace(e, verdict=search.verdict(i)) for i, e in sorted(examined.items()))
    return BisectReport(
        torch=options.torch, python=options.python, command=redact_text(shlex.join(options.reproducer.argv)),
        versions=tuple(options.max_versions),
        reference=options.max_versions[options.reference], examined=found, transitions=tuple(transitions(search)),
        seconds=time.monotonic() - started, scan=options.scan, interrupted=interrupted or scope.cancelled,
    )  # fmt: skip
