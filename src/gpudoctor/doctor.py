"""The one pipeline every face uses: inventory -> plan -> run -> report.

Faces pass options and callbacks in and get a Report back; they compute nothing themselves.
"""

from __future__ import annotations

import datetime
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudoctor import __version__
from gpudoctor.catalog import default_probe_dir, load_catalog
from gpudoctor.errors import GpuDoctorError
from gpudoctor.inventory import collect_environment
from gpudoctor.model import Device, Environment, ProbeResult, ProbeSpec, Report
from gpudoctor.suite import PlannedRun, ResultCallback, StartCallback, plan_runs, run_plan


@dataclass(frozen=True)
class DoctorOptions:
    """What the user asked for; the defaults give a full diagnosis with the doctor's own interpreter."""

    python: str | None = None
    probe_dir: Path | None = None
    only: tuple[str, ...] | None = None
    devices: tuple[Device, ...] | None = None
    jobs: int = 2
    timeout_s: float | None = None
    run_probes: bool = True


def resolve_python(python: str | None) -> str:
    """An absolute path to the interpreter to examine, or a usage error naming what was wrong."""
    if python is None:
        return sys.executable
    found = shutil.which(python) if "/" not in python else python
    if found is None or not Path(found).is_file():
        raise GpuDoctorError(f"--python {python!r}: no such interpreter", hint="give the path to a python executable")
    return str(Path(found).absolute())


def make_report(environment: Environment, results: Iterable[ProbeResult] = ()) -> Report:
    return Report(
        doctor_version=__version__,
        created=datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
        environment=environment,
        results=tuple(results),
    )


def plan(options: DoctorOptions, environment: Environment, specs: Sequence[ProbeSpec]) -> list[PlannedRun]:
    return plan_runs(
        specs,
        environment,
        python=resolve_python(options.python),
        probe_dir=probe_directory(options),
        only=options.only,
        devices=options.devices,
        timeout_s=options.timeout_s,
    )


def probe_directory(options: DoctorOptions) -> Path:
    return (options.probe_dir or default_probe_dir()).absolute()


def diagnose(
    options: DoctorOptions,
    *,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
) -> Report:
    """Run the whole pipeline and return the report."""
    python = resolve_python(options.python)
    if not options.run_probes:
        return make_report(collect_environment(python))
    specs = load_catalog(probe_directory(options))
    environment = collect_environment(python, extra_packages=(n for s in specs for n in s.needs_packages))
    results = run_plan(plan(options, environment, specs), jobs=options.jobs, on_start=on_start, on_result=on_result)
    return make_report(environment, results)
