"""Running a bisect: the search's cells examined as sweep cells (uv environments, kept results, ``--parallel``,
``--ray``), until the search is done or the session is stopped; then what it found, as data every face renders
(with, for a package bisect, the declared requirements on the package each cell breaks)."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.utils import canonicalize_name

from gpudoctor import __version__
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Report
from gpudoctor.process.cancel import CancelScope
from gpudoctor.redact import redact_text
from gpudoctor.report.codec import decode
from gpudoctor.reproducer.bisect import BisectSearch, Transition, Verdict, Way, transitions, way_of
from gpudoctor.reproducer.command import RUN_ID, Reproducer
from gpudoctor.reproducer.subject import UserCommand
from gpudoctor.stackfacts import UnmetRequirement
from gpudoctor.sweep.grid import Cell, CellResult, CellStatus
from gpudoctor.sweep.run import MAX_KEPT_BYTES, Grid, SweepOptions
from gpudoctor.textfile import read_text


@dataclass(frozen=True)
class BisectOptions:
    """A bisect over the releases of ``package``: MAX in torch x MAX cells (``torch``), or any distribution over the
    examined environment's other distributions (``pins``), its release installed over what they declare."""

    reproducer: Reproducer
    torch: str
    versions: tuple[str, ...]  # oldest first
    python: str  # X.Y of the cells
    envs_dir: Path
    package: str = "max"
    pins: tuple[str, ...] | None = None  # a package bisect: everything else, as the examined environment has it
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
            return len(self.versions) - 1
        from packaging.version import InvalidVersion, Version

        try:
            return [Version(v) for v in self.versions].index(Version(self.bad))
        except (InvalidVersion, ValueError):
            raise GpuDoctorError(f"--bad {self.bad}: not a release of the range ({', '.join(self.versions)})") from None

    def cell(self, version: str) -> Cell:
        if self.pins is not None:
            return Cell.of_release(self.package, version, self.python, self.pins)
        return Cell(self.torch, version, self.python)


@dataclass(frozen=True)
class Examined:
    """One cell the search examined: its release, how the reproducer ended, what that means for the search."""

    release: str
    way: Way
    verdict: Verdict
    summary: str
    findings: tuple[tuple[str, str], ...] = ()  # (id, title) of its problem findings
    report: str | None = None  # the cell's report, relative to the envs folder
    seconds: float = 0.0
    reused: bool = False
    unmet: tuple[UnmetRequirement, ...] = ()  # the declared requirements on or of the package that the cell breaks


@dataclass(frozen=True)
class BisectReport:
    torch: str  # of every cell (a MAX bisect), or "" (a package bisect: see pinned)
    python: str
    command: str
    versions: tuple[str, ...]
    reference: str
    examined: tuple[Examined, ...]
    transitions: tuple[Transition, ...]
    seconds: float
    scan: bool = False
    interrupted: bool = False
    package: str = "max"
    pinned: int | None = None  # a package bisect: how many other distributions each cell pins as the examined has
    doctor_version: str = field(default=__version__)

    @property
    def exit_code(self) -> int:
        return 1 if any(e.verdict is not Verdict.GOOD for e in self.examined) else 0


def _examined(cell_result: CellResult, envs_dir: Path, search: BisectSearch, index: int, package: str) -> Examined:
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
                    cell_result.duration_s, cell_result.reused, _unmet_on(report, package))  # fmt: skip


def _unmet_on(report: Report | None, package: str) -> tuple[UnmetRequirement, ...]:
    """What the cell's environment breaks of what its distributions declare, where ``package`` is either side."""
    if report is None:
        return ()
    name = canonicalize_name(package)
    unmet = report.environment.stack.requirements_unmet or ()
    return tuple(u for u in unmet if name in (canonicalize_name(u.needs), canonicalize_name(u.package)))


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
    search = BisectSearch(options.versions, options.reference, scan=options.scan)
    shown = "MAX" if options.pins is None else options.package
    run_cells = _run_cells(options)
    started = time.monotonic()
    examined: dict[int, Examined] = {}
    interrupted = False
    while not scope.cancelled and (picks := search.next(options.parallel)):
        cells = tuple(options.cell(options.versions[i]) for i in picks)
        if on_event is not None:
            on_event(f"examining {shown} " + ", ".join(c.release for c in cells))
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
            examined[index] = _examined(cell_result, options.envs_dir, search, index, options.package)
            if on_event is not None:
                cell = examined[index]
                kept = " (kept from an earlier run)" if cell.reused else ""
                on_event(f"{shown} {cell.release}: {cell.way.label}{kept}")
        interrupted = interrupted or grid.interrupted
    found = tuple(replace(e, verdict=search.verdict(i)) for i, e in sorted(examined.items()))
    return BisectReport(
        torch=options.torch, python=options.python, command=redact_text(shlex.join(options.reproducer.argv)),
        versions=tuple(options.versions),
        reference=options.versions[options.reference], examined=found, transitions=tuple(transitions(search)),
        seconds=time.monotonic() - started, scan=options.scan, interrupted=interrupted or scope.cancelled,
        package=options.package, pinned=None if options.pins is None else len(options.pins),
    )  # fmt: skip
