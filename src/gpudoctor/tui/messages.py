"""The messages the app's worker thread posts to the app: the plan, a run started or ended, the report, a failure.

Textual delivers them on the app's own loop, so the UI never waits on the work.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from textual.message import Message

from gpudoctor.model import Environment, ProbeResult, Report
from gpudoctor.suite.plan import PlannedRun


class RunPlanned(Message):
    def __init__(self, environment: Environment, planned: Sequence[PlannedRun]) -> None:
        super().__init__()
        self.environment = environment
        self.planned = list(planned)


class RunStarted(Message):
    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.at = time.monotonic()


class RunEnded(Message):
    def __init__(self, result: ProbeResult) -> None:
        super().__init__()
        self.result = result


class ReportReady(Message):
    def __init__(self, report: Report) -> None:
        super().__init__()
        self.report = report


class WorkFailed(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
