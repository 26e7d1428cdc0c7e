"""A command's request for the interactive face: on a terminal, `gpudoctor`, `gpudoctor fleet` and
`gpudoctor run --tui` hand their subject and options to the TUI instead of printing. The CLI returns one of these;
the program (gpudoctor.program) starts the TUI with it, so that no face imports another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.report.files import ReportFiles

if TYPE_CHECKING:
    from gpudoctor.doctor import DoctorOptions
    from gpudoctor.fleet.ray_runner import FleetOptions
    from gpudoctor.fleet.report import FleetReport
    from gpudoctor.subject import Subject


@dataclass(frozen=True)
class DoctorAppRequest:
    """Run the doctor's app on this subject (the probes, or `gpudoctor run --tui`'s command) with these options;
    write these report files when it ends."""

    subject: Subject
    options: DoctorOptions
    files: ReportFiles


@dataclass(frozen=True)
class FleetAppRequest:
    """Run the fleet view with these options; ``after`` gets the fleet's report when it ran to its end."""

    options: FleetOptions
    after: Callable[[FleetReport], None]


Handoff = DoctorAppRequest | FleetAppRequest
