"""A log or a pasted traceback as a subject (`gpudoctor explain`): nothing to run, one failing run made of the log's
text (gpudoctor.reproducer.log), examined by the same pipeline as every subject, so every face shows it, the TUI
included."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.examination import Fingerprint, RunContext
from gpudoctor.kernelsection import KernelSection
from gpudoctor.model import Environment, ProbeResult, ProbeSpec, Report
from gpudoctor.reproducer.log import log_result
from gpudoctor.suite.plan import PlannedRun
from gpudoctor.suite.schedule import ScheduleHandler


@dataclass(frozen=True)
class PastedLog:
    """The text of a log (already read as untrusted input: ``reproducer.log.read_log``) and how to name it."""

    text: str = field(repr=False)
    name: str
    title: str = field(default="your log", init=False)
    records_matrix_row: bool = field(default=False, init=False)

    @property
    def needs_packages(self) -> tuple[str, ...]:
        return ()

    def matrix_probes(self) -> tuple[ProbeSpec, ...]:
        return ()

    def plan(self, environment: Environment, python: str, scratch: Path) -> list[PlannedRun]:
        return []

    def handlers(self, context: RunContext) -> Sequence[ScheduleHandler]:
        return ()

    def run_own(self, context: RunContext) -> tuple[ProbeResult, ...]:
        result = log_result(self.text, self.name)
        context.events.ended(result)  # a run that is not a probe: heard at its end, as a user's command is
        return (result,)

    def concluded(self, report: Report) -> Report:
        return report

    def section(self, environment: Environment, results: Sequence[ProbeResult]) -> KernelSection | None:
        return None

    def fingerprint(self) -> Fingerprint:
        digest = hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return Fingerprint({"only": None, "timeout_s": None, "log": digest}, folder="logs")
