"""What the doctor examines: a `Subject` (the probe suite, a kernel package, a user's command) plans its probe runs
(``doctor.examine`` runs them as one schedule), adds a run of its own where it has one, its report section and its
sweep fingerprint (what a run is given: gpudoctor.examination).

Like pytest's ``Item``: one kind of thing for every kind of work, so the pipeline (``doctor.examine``), the sweep,
the TUI and the handoffs hold a subject and never ask which kind it is. ``ProbeSuite`` (catalog.toml) lives here;
``kernel.subject.KernelPackage`` and ``reproducer.subject.UserCommand`` are the other two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gpudoctor.examination import Fingerprint, RunContext
from gpudoctor.kernelsection import KernelSection
from gpudoctor.model import Device, Environment, ProbeResult, ProbeSpec, Report
from gpudoctor.suite.catalog import default_probe_dir, load_catalog

if TYPE_CHECKING:  # imported where a plan is made: the inventory-only run makes none
    from gpudoctor.suite.plan import PlannedRun
    from gpudoctor.suite.schedule import ScheduleHandler


class Subject(Protocol):
    """One kind of work the doctor examines."""

    @property
    def title(self) -> str:
        """What a face says it is running: "the probes", "your kernel", "your command"."""

    @property
    def needs_packages(self) -> tuple[str, ...]:
        """Distributions the inventory looks up beyond its own list."""

    @property
    def records_matrix_row(self) -> bool:
        """Whether a report of it is a row of the compatibility matrix (and the matrix can advise on it)."""

    def matrix_probes(self) -> tuple[ProbeSpec, ...]:
        """The probes a matrix row of it records (empty when it records none)."""

    def plan(self, environment: Environment, python: str, scratch: Path) -> list[PlannedRun]:
        """The probe runs, prerequisites first; ``scratch`` is the examination's own folder."""

    def handlers(self, context: RunContext) -> Sequence[ScheduleHandler]:
        """What hears the schedule of its plan besides the faces (the kernel's marker of the CPU run's end)."""

    def run_own(self, context: RunContext) -> tuple[ProbeResult, ...]:
        """Its run that is not a probe (a user's command), after the schedule; () when it has none."""

    def concluded(self, report: Report) -> Report:
        """The report with what only this subject can add once it is concluded (else as it is)."""

    def section(self, environment: Environment, results: Sequence[ProbeResult]) -> KernelSection | None:
        """The report's kernel section, or None."""

    def fingerprint(self) -> Fingerprint:
        """What a sweep keeps its cells under."""


@dataclass(frozen=True)
class ProbeSuite:
    """gpudoctor's own probes, from ``probe_dir/catalog.toml`` (default: the shipped ones): ``only`` these (with
    what they build on), on these ``devices``, each within ``timeout_s`` when given."""

    probe_dir: Path | None = None
    only: tuple[str, ...] | None = None
    devices: tuple[Device, ...] | None = None
    timeout_s: float | None = None
    title: str = field(default="the probes", init=False)
    records_matrix_row: bool = field(default=True, init=False)

    @property
    def directory(self) -> Path:
        return (self.probe_dir or default_probe_dir()).absolute()

    def probes(self) -> tuple[ProbeSpec, ...]:
        return load_catalog(self.directory)

    @property
    def needs_packages(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for spec in self.probes() for name in spec.needs_packages))

    def matrix_probes(self) -> tuple[ProbeSpec, ...]:
        return self.probes()

    def plan(self, environment: Environment, python: str, scratch: Path) -> list[PlannedRun]:
        from gpudoctor.suite.plan import plan_runs

        return plan_runs(
            self.probes(),
            environment,
            python=python,
            probe_dir=self.directory,
            only=self.only,
            devices=self.devices,
            timeout_s=self.timeout_s,
        )

    def handlers(self, context: RunContext) -> Sequence[ScheduleHandler]:
        return ()

    def run_own(self, context: RunContext) -> tuple[ProbeResult, ...]:
        return ()

    def concluded(self, report: Report) -> Report:
        return report

    def section(self, environment: Environment, results: Sequence[ProbeResult]) -> KernelSection | None:
        return None

    def fingerprint(self) -> Fingerprint:
        return Fingerprint({"only": sorted(self.only) if self.only else None, "timeout_s": self.timeout_s})
