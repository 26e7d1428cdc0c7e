"""A user's reproducer as a subject (`gpudoctor run`, each cell of `gpudoctor bisect`): one run of the command under
its supervisor (gpudoctor.reproducer.command), with the host-indexing lines of the Mojo packages beside it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.examination import Fingerprint, RunContext
from gpudoctor.kernel.scan import scan_package
from gpudoctor.kernelsection import KernelSection
from gpudoctor.model import Environment, ProbeResult, ProbeSpec, Report
from gpudoctor.protocol import ReproducerDetail
from gpudoctor.reproducer.command import (
    HOST_INDEXING_DETAIL,
    Reproducer,
    fingerprint,
    fingerprint_key,
    left_running_finding,
    run_command,
)
from gpudoctor.reproducer.controls import run_controls
from gpudoctor.reproducer.instrumented import rerun_with_instruments
from gpudoctor.suite.plan import PlannedRun
from gpudoctor.suite.schedule import ScheduleHandler

MAX_PACKAGES = 16


def mojo_packages_beside(reproducer: Reproducer) -> list[Path]:
    """The Mojo packages (folders with __init__.mojo) in and below the folder of each script the command names, up
    to two levels down: the custom ops a reproducer loads with CustomOpLibrary usually live there."""
    found: list[Path] = []
    for arg in reproducer.argv:
        script = reproducer.cwd / arg
        if not arg.endswith(".py") or not script.is_file():
            continue
        for marker in sorted(script.parent.glob("__init__.mojo")) + sorted(script.parent.glob("*/__init__.mojo")) + \
                sorted(script.parent.glob("*/*/__init__.mojo")):  # fmt: skip
            if marker.parent not in found and len(found) < MAX_PACKAGES:
                found.append(marker.parent)
    return found


def host_indexing_lines(reproducer: Reproducer) -> list[str]:
    """Every line of those packages' execute() that indexes a tensor from host code (gpudoctor.kernel.scan's static
    scan, as `gpudoctor kernel` runs it): what crashes on a GPU only (seed 000)."""
    lines = []
    for package in mojo_packages_beside(reproducer):
        scan = scan_package(package)
        try:
            where = package.relative_to(reproducer.cwd)
        except ValueError:
            where = package
        lines += [f"{where}/{line.file}:{line.line}: `{line.text}` (op {op.name}, outside foreach)"
                  for op in scan.ops for line in op.host_indexing]  # fmt: skip
    return lines


@dataclass(frozen=True)
class UserCommand:
    """The user's command: no probe runs to plan, one run of its own under the command's supervisor. The
    interpreter examined is the one that runs ``python``/``*.py`` in it (the examination's ``python``: a sweep
    cell's, or ``--python``), and the Mojo packages beside the script are scanned as `gpudoctor kernel` scans them."""

    reproducer: Reproducer
    instruments: bool = False  # rerun a failure with the GPU's instruments (`gpudoctor run`; a bisect's cells do not)
    sanitize: bool = False  # and a command that passed, under memcheck and initcheck (`gpudoctor run --sanitize`)
    title: str = field(default="your command", init=False)
    needs_packages: tuple[str, ...] = field(default=(), init=False)
    records_matrix_row: bool = field(default=False, init=False)  # a user's command says nothing about the stack's row

    def matrix_probes(self) -> tuple[ProbeSpec, ...]:
        return ()

    def plan(self, environment: Environment, python: str, scratch: Path) -> list[PlannedRun]:
        return []  # its one run is the command, not a probe: a face hears of it when it ends

    def handlers(self, context: RunContext) -> Sequence[ScheduleHandler]:
        return ()

    def run_own(self, context: RunContext) -> tuple[ProbeResult, ...]:
        reproducer = dataclasses.replace(self.reproducer, python=context.python)
        result = run_command(reproducer, context.cancel)
        if lines := host_indexing_lines(self.reproducer):
            result = dataclasses.replace(result, details={**result.details, HOST_INDEXING_DETAIL: lines[:20]})
        if self.instruments and context.environment is not None:
            result = rerun_with_instruments(
                reproducer, result, context.environment, context.cancel, passing_too=self.sanitize
            )
        context.events.ended(result)
        if ReproducerDetail.INSTRUMENTS in result.details:  # it failed on a GPU: the known-good control beside it
            return (result, *run_controls(result, context))
        return (result,)

    def concluded(self, report: Report) -> Report:
        """The notice naming what the command left running, which gpudoctor ended."""
        left = [finding for result in report.results if (finding := left_running_finding(result)) is not None]
        return dataclasses.replace(report, findings=(*report.findings, *left)) if left else report

    def section(self, environment: Environment, results: Sequence[ProbeResult]) -> KernelSection | None:
        return None

    def fingerprint(self) -> Fingerprint:
        # each reproducer keeps its own results: cells are shared with the probes, runs are not
        return Fingerprint(
            {"only": None, "timeout_s": None, "reproducer": fingerprint(self.reproducer)},
            folder=f"reproducer-{fingerprint_key(self.reproducer)}",
        )
