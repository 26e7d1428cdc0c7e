"""What an examination gives a subject's runs and hears back: `Events` (how a face hears it), `RunContext` (what
running a plan needs beyond the plan) and `Fingerprint` (what a sweep keeps a subject's cells under).

Below every subject (gpudoctor.subject, kernel.subject, reproducer.subject), so each can use them without
importing the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.model import Environment, ProbeResult
from gpudoctor.process.cancel import CancelScope

if TYPE_CHECKING:  # the inventory-only run hears no plan: the suite's modules stay unimported
    from gpudoctor.suite.plan import PlannedRun


@dataclass(frozen=True)
class Events:
    """What a face hears, each optional: ``plan`` the environment and every planned run before any starts (a face
    can draw them; a run that is not a probe, such as a user's command, is not planned and is heard only at its
    end); ``start`` and ``result`` each run as it starts and ends, from worker threads."""

    plan: Callable[[Environment, Sequence[PlannedRun]], None] | None = None
    start: Callable[[PlannedRun], None] | None = None
    result: Callable[[ProbeResult], None] | None = None

    def planned(self, environment: Environment, runs: Sequence[PlannedRun]) -> None:
        if self.plan is not None:
            self.plan(environment, runs)

    def ended(self, result: ProbeResult) -> None:
        if self.result is not None:
            self.result(result)


@dataclass(frozen=True)
class RunContext:
    """What running a plan needs beyond the plan: the interpreter, a scratch folder that lives as long as the
    examination, how many processes at once, who hears it, and the scope that stops it."""

    python: str
    scratch: Path
    jobs: int
    events: Events
    cancel: CancelScope | None = None
    environment: Environment | None = None  # the inventory of the interpreter examined


@dataclass(frozen=True)
class Fingerprint:
    """What a sweep keeps a cell's result under: ``request`` (a kept result is reused only for an equal one) and a
    ``folder`` of its own under the results when results of this subject must not mix with the probes'."""

    request: Mapping[str, object]
    folder: str | None = None
