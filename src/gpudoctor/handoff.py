"""A command's request for the interactive face: on a terminal, `gpudoctor`, `gpudoctor fleet` and
`gpudoctor run --tui` hand their parsed options to the TUI instead of printing. The CLI returns one of these; the
program (gpudoctor.program) starts the TUI with it, so that no face imports another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.report.files import ReportFiles

if TYPE_CHECKING:
    from gpudoctor.doctor import DoctorOptions
    from gpudoctor.fleet.ray_runner import FleetOptions
    from gpudoctor.fleet.report import FleetReport
    from gpudoctor.reproducer.command import Reproducer


@dataclass(frozen=True)
class DoctorAppRequest:
    """Run the doctor's app with these options; write these report files when it ends."""

    options: DoctorOptions
    files: ReportFiles


@dataclass(frozen=True)
class FleetAppRequest:
    """Run the fleet view with these options; ``after`` gets the fleet's report when it ran to its end."""

    options: FleetOptions
    after: Callable[[FleetReport], None]


@dataclass(frozen=True)
class RunAppRequest:
    """`gpudoctor run --tui`: the user's command in the doctor's app; write these report files when it ends."""

    reproducer: Reproducer
    files: ReportFiles


Handoff = DoctorAppRequest | FleetAppRequest | RunAppRequest
