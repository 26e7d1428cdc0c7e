"""A log or a pasted traceback as a subject (`gpudoctor explain`): nothing to run, one failing run made of the log's
text (gpudoctor.reproducer.log), examined by the same pipeline as every subject, so every face shows it, the TUI
included."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.examination import Fingerprint, RunContext
from gpudoctor.kernelsection import KernelSection
from gpudoctor.knowledge.answer import GENERIC_ID
from gpudoctor.knowledge.failure_words import reads_as_failure
from gpudoctor.model import Environment, Outcome, ProbeResult, ProbeSpec, Report
from gpudoctor.protocol import LOG_RUN_ID
from gpudoctor.reproducer.log import NO_FAILURE, log_result
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
        """A log none of whose lines reads as an error, and that nothing in the knowledge explains, is no failure:
        "no failure found in this log" and nothing else (not the generic answer to a failure that is not there)."""
        run = next((r for r in report.results if r.id == LOG_RUN_ID), None)
        if run is None or reads_as_failure(run.stderr_tail or ""):
            return report
        from gpudoctor.knowledge.reading import shows_failure
        from gpudoctor.knowledge.vocabulary import load_vocabulary

        if shows_failure(run.stderr_tail or "", load_vocabulary()):
            return report  # a failure in its own words, with no line that says "error" ("fallen off the bus")
        if any(LOG_RUN_ID in f.runs and f.id != GENERIC_ID for f in report.findings):
            return report
        passed = dataclasses.replace(run, outcome=Outcome.PASS, summary=f"{self.name}: {NO_FAILURE}")
        results = tuple(passed if r is run else r for r in report.results)
        findings = tuple(f for f in report.findings if LOG_RUN_ID not in f.runs)
        return dataclasses.replace(report, results=results, findings=findings)

    def section(self, environment: Environment, results: Sequence[ProbeResult]) -> KernelSection | None:
        return None

    def fingerprint(self) -> Fingerprint:
        digest = hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return Fingerprint({"only": None, "timeout_s": None, "log": digest}, folder="logs")
