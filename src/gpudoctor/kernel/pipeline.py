"""`gpudoctor kernel PATH`: a user's Mojo custom-op package, run in isolation on the CPU and on each GPU next
to gpudoctor's control kernel, with a static scan of its ``execute`` bodies and a CPU-vs-GPU comparison.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.doctor import default_jobs, run_and_conclude
from gpudoctor.errors import GpuDoctorError
from gpudoctor.facts.interpreter import resolve_python
from gpudoctor.facts.inventory import collect_environment
from gpudoctor.kernel.calls import CallRequest, KernelCall, resolve_calls
from gpudoctor.kernel.scan import PackageScan, scan_package
from gpudoctor.kernel.section import KernelSection
from gpudoctor.kernel.source.check import SourceCheck, check_source
from gpudoctor.knowledge import CONTROL_PROBE, KERNEL_PROBE
from gpudoctor.model import Device, Environment, ProbeResult, ProbeSpec, Report
from gpudoctor.process.cancel import CancelScope
from gpudoctor.redact import redact_text
from gpudoctor.suite.catalog import default_probe_dir, load_catalog
from gpudoctor.suite.plan import PlannedRun, known_skip_reason
from gpudoctor.suite.runner import ProbeInvocation
from gpudoctor.suite.schedule import ResultCallback, Schedule, ScheduledRun, ScheduleHandler, StartCallback

KERNEL_SPEC = ProbeSpec(
    id=KERNEL_PROBE,
    script="kernel.py",
    title="your Mojo custom-op package through CustomOpLibrary",
    stage=3,
    devices=(Device.CPU, Device.CUDA),
    needs_packages=("torch", "max"),
    timeout_s=600.0,
    details=(
        "bridge_module",
        "compile_errors",
        "ops",
        "compare_missing",
        "compared_with_cpu",
        "differs_from_cpu",
        "differs_from_reference",
        "output_unwritten",
        "output_all_zero",
        "cpu_result_suspect",
        "reference_error",
        "results_checked",
        "mismatch",
        "accumulates_into_output",
        "not_repeatable",
    ),
)


@dataclass(frozen=True)
class KernelOptions:
    package: Path
    requests: tuple[CallRequest, ...] = ()
    python: str | None = None
    devices: tuple[Device, ...] | None = None
    jobs: int = field(default_factory=default_jobs)
    timeout_s: float | None = None
    probe_dir: Path | None = None


@dataclass(frozen=True)
class GpuTarget:
    """One GPU to run on: a label for the run id ("" when there is only one) and the environment selecting it."""

    label: str | None
    env: dict[str, str]


def gpu_targets(environment: Environment, env: dict[str, str] | None = None) -> list[GpuTarget]:
    """One target per visible GPU, each selected with CUDA_VISIBLE_DEVICES in its own process.

    With CUDA_VISIBLE_DEVICES set, its entries are used as given; otherwise GPUs are numbered in NVML's
    (PCI bus) order, and CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA number them the same way.
    """
    env = dict(os.environ) if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if len(entries) <= 1:
            return [GpuTarget(None, {})]
        return [GpuTarget(str(i), {"CUDA_VISIBLE_DEVICES": entry}) for i, entry in enumerate(entries)]
    gpus = environment.driver.gpus
    if len(gpus) <= 1:
        return [GpuTarget(None, {})]
    return [
        GpuTarget(str(gpu.index), {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(gpu.index)})
        for gpu in gpus
    ]


def check_package_path(path: Path) -> Path:
    """The package path, absolute; a usage error when it does not exist (a missing __init__.mojo is left to
    MAX, whose real error the report then explains)."""
    path = Path(os.path.abspath(path))  # normalised: reports say /a/b, never /a/x/../b
    if not path.exists():
        raise GpuDoctorError(f"{path}: no such file or directory", hint="give the folder holding your .mojo files")
    if not path.is_dir() and not path.is_file():
        raise GpuDoctorError(f"{path}: not a folder or a file", hint="give the folder holding __init__.mojo")
    if path.is_file() and path.suffix not in (".mojo", ".mojopkg", ".mojoc", ".🔥"):
        raise GpuDoctorError(f"{path}: not a Mojo package", hint="give the folder holding __init__.mojo")
    return path


def _kernel_args(package: Path, scan: PackageScan, calls: Sequence[KernelCall]) -> tuple[str, ...]:
    args = ["--package", str(package)]
    if scan.ops:
        args += ["--ops", *[op.name for op in scan.ops]]
    if calls:
        args += ["--calls", json.dumps([c.to_dict() for c in calls], separators=(",", ":"))]
    return tuple(args)


def plan_kernel(
    options: KernelOptions,
    environment: Environment,
    scan: PackageScan,
    calls: Sequence[KernelCall],
    scratch: Path,
) -> list[PlannedRun]:
    """Control and kernel on the CPU and on each GPU, all at once; each GPU kernel run compares its outputs
    with the CPU run's once that has ended (the doctor marks the end with a file).

    Without calls the package is only compiled (on the CPU) and its ops listed: there is nothing to compare.
    """
    python = resolve_python(options.python)
    probe_dir = (options.probe_dir or default_probe_dir()).absolute()
    control = next((s for s in load_catalog(probe_dir) if s.id == CONTROL_PROBE), None)
    if control is None:
        raise GpuDoctorError(f"{probe_dir}: the probe catalog has no {CONTROL_PROBE!r} probe (the control kernel)")
    control = dataclasses.replace(control, args=(*control.args, "--no-compile"))
    base = _kernel_args(options.package, scan, calls)
    saved = scratch / "cpu-results.pt"
    wanted = set(options.devices) if options.devices else {Device.CPU, Device.CUDA}
    if not calls:
        wanted = {Device.CPU}

    def planned(spec: ProbeSpec, device: Device, target: GpuTarget | None) -> PlannedRun:
        invocation = ProbeInvocation(
            spec=spec,
            device=device,
            python=python,
            probe_dir=probe_dir,
            timeout_s=options.timeout_s or spec.timeout_s,
            extra_env=target.env if target else {},
            gpu_label=target.label if target else None,
        )
        return PlannedRun(invocation, (), known_skip_reason(spec, device, environment))

    plan: list[PlannedRun] = []
    if Device.CPU in wanted:
        if calls:
            plan.append(planned(control, Device.CPU, None))
        plan.append(planned(dataclasses.replace(KERNEL_SPEC, args=(*base, "--save", str(saved))), Device.CPU, None))
    if Device.CUDA in wanted:
        # The GPU runs start at once; each waits for the CPU run's end only when it is time to compare.
        compare = ("--compare", str(saved), "--cpu-done", str(cpu_done_marker(scratch)))
        gpu_kernel = dataclasses.replace(KERNEL_SPEC, args=(*base, *compare) if Device.CPU in wanted else base)
        for target in gpu_targets(environment):
            plan.append(planned(control, Device.CUDA, target))
            plan.append(planned(gpu_kernel, Device.CUDA, target))
    return plan


def cpu_done_marker(scratch: Path) -> Path:
    return scratch / "cpu-run-ended"


def kernel_section(
    package: Path, scan: PackageScan, calls: Sequence[KernelCall], source: SourceCheck | None = None
) -> KernelSection:
    shown = []
    for call in calls:
        entry = call.to_dict()
        reference = entry.get("reference")
        if reference and "file" in reference:
            entry["reference"] = {"file": redact_text(reference["file"]), "function": reference["function"]}
        shown.append(entry)
    section: KernelSection = {"package": redact_text(str(package)), "scan": scan.to_dict(), "calls": shown}
    if source is not None:
        section["source"] = source.to_dict()
    return section


def diagnose_kernel(
    options: KernelOptions,
    *,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
    cancel: CancelScope | None = None,
) -> Report:
    """Scan, plan, run and report on a user's kernel package; ``cancel`` stops it as it stops ``diagnose``."""
    package = check_package_path(options.package)
    options = dataclasses.replace(options, package=package)
    scan = scan_package(package)
    calls = resolve_calls(options.requests, scan)
    python = resolve_python(options.python)
    environment = collect_environment(python, extra_packages=KERNEL_SPEC.needs_packages, cancel=cancel)
    source = check_source(package, environment.packages)
    with tempfile.TemporaryDirectory(prefix="gpudoctor-kernel-") as scratch:
        planned = plan_kernel(options, environment, scan, calls, Path(scratch))
        schedule = Schedule(planned, jobs=options.jobs, cancel=cancel)
        return run_and_conclude(
            environment,
            schedule,
            on_start=on_start,
            on_result=on_result,
            kernel=kernel_section(package, scan, calls, source),
            handlers=[CpuRunEnded(cpu_done_marker(Path(scratch)))],
        )


@dataclass(frozen=True)
class CpuRunEnded(ScheduleHandler):
    """Marks the CPU kernel run's end with a file: the GPU runs may compare now (or know there is nothing to
    compare with)."""

    marker: Path

    def on_result(self, schedule: Schedule, run: ScheduledRun, result: ProbeResult) -> None:
        if result.id == KERNEL_SPEC.run_id(Device.CPU):
            self.marker.touch()
