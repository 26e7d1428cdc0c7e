"""`gpudoctor sweep`: build each cell's environment, examine the sweep's subject in it (the probes, a user's kernel,
a bisect's command) through the cell's interpreter, keep its report, and merge its row into the matrix through the
locked store; cells run concurrently, stop together.

Finished cells are kept on disk (``<envs>/results/``): a rerun reuses them unless asked to refresh, and a
stopped sweep loses nothing that had ended.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpudoctor import __version__
from gpudoctor.atomic import atomic_write
from gpudoctor.doctor import DoctorOptions, default_jobs, examine
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Report
from gpudoctor.process.cancel import Cancelled, CancelScope
from gpudoctor.report.codec import decode, encode
from gpudoctor.subject import Subject
from gpudoctor.suite.catalog import run_ids
from gpudoctor.sweep.envs import Built, EnvironmentBuilder
from gpudoctor.sweep.grid import Cell, CellResult, CellStatus
from gpudoctor.textfile import read_text

RESULTS_DIR = "results"
MAX_KEPT_BYTES = 64 * 1024 * 1024  # a kept cell result or report


@dataclass(frozen=True)
class SweepOptions:
    cells: tuple[Cell, ...]
    envs_dir: Path
    subject: Subject  # what every cell examines: the probes, a user's kernel, a bisect's command
    matrix_dir: Path | None = None  # None: record nothing in the matrix (nor does a subject that is no row)
    parallel: int = 0  # cells examined at once (0: as the machine allows, see __post_init__)
    probe_jobs: int = 0  # probe processes at once inside each cell (0: as the machine allows)
    refresh: bool = False
    inherit: str | None = None  # an interpreter whose packages the cells may reuse (see EnvironmentBuilder)
    find_links: tuple[Path, ...] = ()  # wheelhouses for uv (with offline: nothing from an index)
    offline: bool = False

    def __post_init__(self) -> None:
        """The defaults, resolved once where the options are made (a node of a Ray sweep keeps the driver's): cells
        at once within the machine's CPU and memory (default_jobs counts both), one cell per four probe slots so that
        one cell builds its environment (I/O) while others examine theirs (CPU); the slots shared among the cells."""
        parallel = self.parallel or max(1, default_jobs() // 4)
        object.__setattr__(self, "parallel", parallel)
        object.__setattr__(self, "probe_jobs", self.probe_jobs or max(1, default_jobs() // parallel))


@dataclass(frozen=True)
class SweepEvent:
    """Progress: a cell started a step ("build", "examine") or ended ("done", with its result)."""

    cell: Cell
    step: str
    result: CellResult | None = None


@dataclass(frozen=True)
class Grid:
    """What a sweep found: one result per cell, in grid order."""

    results: tuple[CellResult, ...]
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        return 1 if any(r.status is not CellStatus.HEALTHY for r in self.results) else 0

    def to_dict(self) -> dict[str, object]:
        return {
            "doctor_version": __version__,
            "interrupted": self.interrupted,
            "cells": [r.to_dict() for r in self.results],
        }


EventCallback = Callable[[SweepEvent], None]


class Sweep:
    def __init__(self, options: SweepOptions, builder: EnvironmentBuilder | None = None) -> None:
        self.options = options
        self.builder = builder or EnvironmentBuilder(
            options.envs_dir, inherit=options.inherit, find_links=options.find_links, offline=options.offline
        )
        self.fingerprint = options.subject.fingerprint()
        self.results_dir = options.envs_dir / RESULTS_DIR
        if self.fingerprint.folder is not None:
            self.results_dir = self.results_dir / self.fingerprint.folder

    def _result_file(self, cell: Cell) -> Path:
        return self.results_dir / f"{cell.key}.json"

    def _report_file(self, cell: Cell) -> Path:
        return self.results_dir / f"{cell.key}.report.json"

    def earlier(self, cell: Cell) -> CellResult | None:
        """The result an earlier sweep kept for this cell, unless it was interrupted or is unreadable."""
        path = self._result_file(cell)
        try:
            result = CellResult.from_dict(json.loads(read_text(path, MAX_KEPT_BYTES)))
        except (GpuDoctorError, ValueError, KeyError, TypeError):
            return None
        if result.cell != cell or result.status is CellStatus.INTERRUPTED or result.request != self.request:
            return None
        return result

    @property
    def request(self) -> dict[str, object]:
        """What decides a cell's result besides the cell: kept results are reused only for the same."""
        return {"doctor": __version__, "inherit": self.options.inherit, **self.fingerprint.request}

    def examine(self, cell: Cell, cancel: CancelScope, on_event: EventCallback | None) -> CellResult:
        def event(step: str, result: CellResult | None = None) -> None:
            if on_event is not None:
                on_event(SweepEvent(cell, step, result))

        if not self.options.refresh and (kept := self.earlier(cell)) is not None:
            self.record(cell, kept)  # idempotent: the matrix counts each report once
            return dataclasses.replace(kept, reused=True)
        started = time.monotonic()
        event("build")
        try:
            built = self.builder.build(cell, cancel)
        except Cancelled:  # stopped while the environment was being built
            return CellResult(cell, CellStatus.INTERRUPTED, "stopped while building", duration_s=_since(started))
        if not isinstance(built, Built):
            status = CellStatus.UNRESOLVABLE if built.unresolvable else CellStatus.BUILD_FAILED
            result = CellResult(cell, status, built.reason, duration_s=_since(started), request=self.request)
            return self._keep(cell, result)
        event("examine")
        try:
            report = self._examine(built, cancel)
        except Cancelled:  # stopped while the cell's interpreter was being asked for its inventory
            return CellResult(cell, CellStatus.INTERRUPTED, "stopped while examining", duration_s=_since(started))
        if report.interrupted:
            return CellResult(cell, CellStatus.INTERRUPTED, "stopped while examining", duration_s=_since(started))
        report_file = self._report_file(cell)
        atomic_write(report_file, json.dumps(encode(report), indent=2) + "\n")
        result = CellResult(
            cell,
            CellStatus.PROBLEM if report.exit_code else CellStatus.HEALTHY,
            _summary(report),
            findings=tuple(f.id for f in report.findings if f.is_problem),
            problems=tuple(r.id for r in report.results if r.outcome.is_problem),
            installed=dict(built.installed),
            report=str(report_file.relative_to(self.options.envs_dir)),
            duration_s=_since(started),
            request=self.request,
        )
        self.record(cell, result, report)
        return self._keep(cell, result)

    def _examine(self, built: Built, cancel: CancelScope) -> Report:
        """The doctor's examination of the sweep's subject with the cell's interpreter."""
        options = DoctorOptions(python=str(built.python), jobs=self.options.probe_jobs)
        return examine(self.options.subject, options, cancel=cancel)

    def _keep(self, cell: Cell, result: CellResult) -> CellResult:
        atomic_write(self._result_file(cell), json.dumps(result.to_dict(), indent=2) + "\n")
        return result

    def record(self, cell: Cell, result: CellResult, report: Report | None = None) -> None:
        """Merge the cell's row into the matrix (when there is one, and the cell was examined)."""
        subject = self.options.subject
        if self.options.matrix_dir is None or result.report is None or not subject.records_matrix_row:
            return
        from gpudoctor.matrix import MatrixStore, row_from_report

        if report is None:
            try:
                data = json.loads(read_text(self.options.envs_dir / result.report, MAX_KEPT_BYTES))
                report = decode(data)
            except (GpuDoctorError, ValueError, KeyError, TypeError):
                return
        try:
            row = row_from_report(report, run_ids(subject.matrix_probes()))
        except GpuDoctorError:
            return  # nothing ran to an end: no row to record
        MatrixStore(self.options.matrix_dir).add(row)

    def run(self, *, on_event: EventCallback | None = None, cancel: CancelScope | None = None) -> Grid:
        session = cancel if cancel is not None else CancelScope()
        cells = list(self.options.cells)
        results: dict[Cell, CellResult] = {}
        stop = session.child()  # this sweep's cells, stopped together without stopping the caller's scope
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.options.parallel)) as pool:
            futures = {pool.submit(self._guarded, cell, stop, on_event): cell for cell in cells}
            try:
                for future in concurrent.futures.as_completed(futures):
                    cell = futures[future]
                    results[cell] = future.result()
                    if on_event is not None:
                        on_event(SweepEvent(cell, "done", results[cell]))
            except BaseException:  # a cell raised (see _guarded), or the progress callback did
                stop.cancel("the sweep failed")
                for pending in futures:
                    pending.cancel()
                raise
        return Grid(tuple(results[c] for c in cells), interrupted=session.cancelled)

    def _guarded(self, cell: Cell, session: CancelScope, on_event: EventCallback | None) -> CellResult:
        if session.cancelled:
            return CellResult(cell, CellStatus.INTERRUPTED, "not started: " + (session.reason or "stopped"))
        try:
            return self.examine(cell, session.child(), on_event)
        except BaseException:
            # A cell that raised is the doctor's own failure (a broken knowledge file, say), the same in every cell:
            # stop the others now, before this worker takes the next cell, rather than sweep on with no progress
            # shown and raise at the very end.
            session.cancel("another cell of the sweep failed")
            raise


def _since(started: float) -> float:
    return time.monotonic() - started


def _summary(report: Report) -> str:
    problems = [r for r in report.results if r.outcome.is_problem]
    if not problems and not report.findings:
        return "every probe that ran passed"
    parts = [f"{r.id}: {r.outcome.value}" for r in problems]
    parts += [f"finding {f.id}" for f in report.findings if f.is_problem]
    return "; ".join(parts) or "notices only"


def sweep(options: SweepOptions, *, on_event: EventCallback | None = None, cancel: CancelScope | None = None) -> Grid:
    """Examine every cell of the grid (see Sweep)."""
    return Sweep(options).run(on_event=on_event, cancel=cancel)


def cell_table(grid: Grid) -> list[list[str]]:
    """The grid as rows of text: MAX down, torch across; each cell its status and finding ids."""
    torches = list(dict.fromkeys(r.cell.torch for r in grid.results))
    maxes = list(dict.fromkeys(r.cell.max for r in grid.results))
    by_cell = {(r.cell.torch, r.cell.max): r for r in grid.results}
    table = [["max \\ torch", *torches]]
    for max_version in maxes:
        line = [max_version]
        for torch in torches:
            result = by_cell.get((torch, max_version))
            line.append("-" if result is None else cell_label(result))
        table.append(line)
    return table


def cell_label(result: CellResult) -> str:
    if result.status is CellStatus.HEALTHY:
        return "pass"
    if result.status is CellStatus.PROBLEM:
        what = ", ".join(result.findings) or ", ".join(result.problems)
        return f"PROBLEM {what}"
    return str(result.status.value)
