"""A user's reproducer as a subject (`gpudoctor run`, each cell of `gpudoctor bisect`): one run of the command under
its supervisor (gpudoctor.reproducer.command), with the host-indexing lines of the Mojo packages beside it."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.calls import channel as calls_channel
from gpudoctor.examination import Fingerprint, RunContext
from gpudoctor.instruments.explain import OpOf
from gpudoctor.instruments.sanitizer import SanitizerError
from gpudoctor.kernel.scan import OpInfo, scan_package
from gpudoctor.kernelsection import KernelSection
from gpudoctor.model import Environment, ProbeResult, ProbeSpec, Report
from gpudoctor.protocol import ReproducerDetail
from gpudoctor.redact import redact_tree
from gpudoctor.reproducer.command import (
    HOST_INDEXING_DETAIL,
    Reproducer,
    fingerprint,
    fingerprint_key,
    left_running_finding,
    run_command,
)
from gpudoctor.reproducer.controls import run_controls, wants_controls
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


def _packages_near(reproducer: Reproducer, limit: int = 64) -> list[Path]:
    """The Mojo packages beside the script (mojo_packages_beside) and beside its folder (a program in `tests/` that
    loads `kernels/add`): where the ops a program calls are looked for by name."""
    found = mojo_packages_beside(reproducer)
    for arg in reproducer.argv:
        script = reproducer.cwd / arg
        if arg.endswith(".py") and script.is_file():
            above = script.resolve().parent.parent
            for marker in sorted(above.glob("*/*/__init__.mojo")):
                if marker.parent not in found and len(found) < limit:
                    found.append(marker.parent)
    return found


_OP_CALL = re.compile(r"\.(\w+)\s*(?:\[[^\]]*\])?\s*\(")


def op_at_launch(reproducer: Reproducer) -> OpOf:
    """For a kernel MAX made of a custom op's `foreach` (named `mogg_for_each_...`, not by the user): the op the
    program called on the line that launched it, found among the ops of the Mojo packages beside the script —
    "op `plus_one` (kernels/add.mojo:15), called at prog.py:17"."""
    scripts = {Path(arg).name: reproducer.cwd / arg for arg in reproducer.argv if arg.endswith(".py")}

    @functools.cache
    def all_ops() -> dict[str, tuple[Path, OpInfo]]:
        # read only when an instrument names a kernel MAX made, not on every failing run
        return {op.name: (package, op) for package in _packages_near(reproducer) for op in scan_package(package).ops}

    def described(name: str) -> str:
        package, op = all_ops()[name]
        try:
            where = package.relative_to(reproducer.cwd)
        except ValueError:
            where = Path(package.name)
        return f"op `{name}` ({where}/{op.file}:{op.line})"

    def called() -> list[tuple[str, str]]:
        """(op, "script:line") of every call of one of those ops in the program's own files."""
        found = []
        for base, path in scripts.items():
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            found += [(name, f"{base}:{n}") for n, line in enumerate(lines, 1) for name in _OP_CALL.findall(line)
                      if name in all_ops()]  # fmt: skip
        return found

    def op_of(error: SanitizerError) -> str | None:
        site = error.launch_site(frozenset(scripts))
        if site is not None and site.file in scripts and site.line is not None:
            try:
                line = scripts[site.file].read_text(errors="replace").splitlines()[site.line - 1]
            except (OSError, IndexError):
                line = ""
            for name in reversed(_OP_CALL.findall(line)):
                if name in all_ops():
                    return f"{described(name)}, called at {site.file}:{site.line}"
        # MAX launches from its own threads: no Python frame names the call. The ops the program calls are the
        # candidates; one alone is the op, several are named as such.
        calls = called()
        names = sorted({name for name, _ in calls})
        if len(names) == 1:
            sites = ", ".join(where for _, where in calls[:3])
            return f"{described(names[0])}, the only custom op the program calls ({sites})"
        if names:
            return "one of the custom ops the program calls: " + ", ".join(described(n) for n in names[:4])
        return None

    return op_of


CALL_CHECKS_DETAIL = ReproducerDetail.CALL_CHECKS


@dataclass(frozen=True)
class UserCommand:
    """The user's command: no probe runs to plan, one run of its own under the command's supervisor. The
    interpreter examined is the one that runs ``python``/``*.py`` in it (the examination's ``python``: a sweep
    cell's, or ``--python``), and the Mojo packages beside the script are scanned as `gpudoctor kernel` scans them."""

    reproducer: Reproducer
    instruments: bool = False  # rerun a failure with the GPU's instruments (`gpudoctor run`; a bisect's cells do not)
    sanitize: bool = False  # and a command that passed, under memcheck and initcheck (`gpudoctor run --sanitize`)
    call_checks: bool = True  # each custom-op call checked against its op's declaration (`--no-call-checks`: off)
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
        checks = calls_channel.new_file(context.scratch) if self.call_checks else None
        result = run_command(dataclasses.replace(reproducer, call_checks_file=str(checks) if checks else None),
                             context.cancel)  # fmt: skip
        if checks is not None and (seen := calls_channel.summary(calls_channel.read_events(checks))):
            result = dataclasses.replace(result, details={**result.details, CALL_CHECKS_DETAIL: redact_tree(seen)})
        if lines := host_indexing_lines(self.reproducer):
            result = dataclasses.replace(result, details={**result.details, HOST_INDEXING_DETAIL: lines[:20]})
        if self.instruments and context.environment is not None:
            result = rerun_with_instruments(
                reproducer, result, context.environment, context.cancel, passing_too=self.sanitize,
                op_of=op_at_launch(self.reproducer),
            )  # fmt: skip
        context.events.ended(result)
        if wants_controls(result):  # it failed on a GPU: the known-good control beside it
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
