"""`gpudoctor kernel PATH` as a subject: a user's Mojo custom-op package, run in isolation on the CPU and on each GPU
next to gpudoctor's control kernel, with a static scan of its ``execute`` bodies and a CPU-vs-GPU comparison.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.examination import Fingerprint, RunContext
from gpudoctor.kernel.calls import CallRequest, KernelCall, resolve_calls
from gpudoctor.kernel.scan import PackageScan, scan_package
from gpudoctor.kernel.source.check import SourceCheck, check_source
from gpudoctor.kernelsection import KernelSection
from gpudoctor.model import Device, Environment, ProbeResult, ProbeSpec, Report
from gpudoctor.protocol import CONTROL_PROBE, KERNEL_PROBE
from gpudoctor.redact import redact_text
from gpudoctor.suite.catalog import KERNEL, default_probe_dir, load_catalog
from gpudoctor.suite.plan import PlannedRun, known_skip_reason
from gpudoctor.suite.runner import ProbeInvocation
from gpudoctor.suite.schedule import Schedule, ScheduledRun, ScheduleHandler


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


def kernel_probe(probe_dir: Path) -> ProbeSpec:
    """The catalog's probe marked as the kernel's (``subject = "kernel"``): what runs the user's package."""
    kernel = next((s for s in load_catalog(probe_dir, KERNEL) if s.id == KERNEL_PROBE), None)
    if kernel is None:
        raise GpuDoctorError(f"{probe_dir}: the probe catalog has no {KERNEL_PROBE!r} probe marked subject = 'kernel'")
    return kernel


@dataclass(frozen=True)
class KernelPackage:
    """The user's package (checked and scanned when made, with ``KernelPackage.load``), the calls to make, and the
    catalog whose control kernel runs next to it."""

    package: Path
    scan: PackageScan
    calls: tuple[KernelCall, ...]
    requests: tuple[CallRequest, ...] = ()
    probe_dir: Path | None = None
    devices: tuple[Device, ...] | None = None
    timeout_s: float | None = None
    sanitize: bool = False  # also run the kernel and the control once each under compute-sanitizer on a GPU
    title: str = field(default="your kernel", init=False)
    records_matrix_row: bool = field(default=False, init=False)  # a user's kernel says nothing about the stack's row

    @classmethod
    def load(
        cls,
        package: Path,
        requests: Sequence[CallRequest] = (),
        *,
        probe_dir: Path | None = None,
        devices: Sequence[Device] | None = None,
        timeout_s: float | None = None,
        sanitize: bool = False,
    ) -> KernelPackage:
        """Check the path, scan the package and resolve the calls against it: usage errors before anything runs."""
        package = check_package_path(package)
        scan = scan_package(package)
        return cls(
            package=package,
            scan=scan,
            calls=resolve_calls(requests, scan),
            requests=tuple(requests),
            probe_dir=probe_dir,
            devices=tuple(devices) if devices else None,
            timeout_s=timeout_s,
            sanitize=sanitize,
        )

    @property
    def directory(self) -> Path:
        return (self.probe_dir or default_probe_dir()).absolute()

    @property
    def needs_packages(self) -> tuple[str, ...]:
        return kernel_probe(self.directory).needs_packages

    def matrix_probes(self) -> tuple[ProbeSpec, ...]:
        return ()

    def plan(self, environment: Environment, python: str, scratch: Path) -> list[PlannedRun]:
        """Control and kernel on the CPU and on each GPU, all at once; each GPU kernel run compares its outputs
        with the CPU run's once that has ended (``run`` marks the end with a file in ``scratch``).

        Without calls the package is only compiled (on the CPU) and its ops listed: there is nothing to compare.
        """
        probe_dir = self.directory
        kernel = kernel_probe(probe_dir)
        control = next((s for s in load_catalog(probe_dir) if s.id == CONTROL_PROBE), None)
        if control is None:
            raise GpuDoctorError(f"{probe_dir}: the probe catalog has no {CONTROL_PROBE!r} probe (the control kernel)")
        control = dataclasses.replace(control, args=(*control.args, "--no-compile"))
        base = _kernel_args(self.package, self.scan, self.calls)
        saved = scratch / "cpu-results.pt"
        wanted = set(self.devices) if self.devices else {Device.CPU, Device.CUDA}
        if not self.calls:
            wanted = {Device.CPU}

        def planned(spec: ProbeSpec, device: Device, target: GpuTarget | None) -> PlannedRun:
            invocation = ProbeInvocation(
                spec=spec,
                device=device,
                python=python,
                probe_dir=probe_dir,
                timeout_s=self.timeout_s or spec.timeout_s,
                extra_env=target.env if target else {},
                gpu_label=target.label if target else None,
            )
            return PlannedRun(invocation, (), known_skip_reason(spec, device, environment))

        plan: list[PlannedRun] = []
        if Device.CPU in wanted:
            if self.calls:
                plan.append(planned(control, Device.CPU, None))
            plan.append(planned(dataclasses.replace(kernel, args=(*base, "--save", str(saved))), Device.CPU, None))
        if Device.CUDA in wanted:
            # The GPU runs start at once; each waits for the CPU run's end only when it is time to compare.
            compare = ("--compare", str(saved), "--cpu-done", str(cpu_done_marker(scratch)))
            gpu_kernel = dataclasses.replace(kernel, args=(*base, *compare) if Device.CPU in wanted else base)
            for target in gpu_targets(environment):
                plan.append(planned(control, Device.CUDA, target))
                plan.append(planned(gpu_kernel, Device.CUDA, target))
        return plan

    def handlers(self, context: RunContext) -> Sequence[ScheduleHandler]:
        return (CpuRunEnded(cpu_done_marker(context.scratch)),)

    def run_own(self, context: RunContext) -> tuple[ProbeResult, ...]:
        """With ``sanitize``: the kernel's and the control's GPU runs (the first GPU's) once more each under
        compute-sanitizer, after the plan's runs (gpudoctor.kernel.sanitize)."""
        if not self.sanitize or not self.calls or context.environment is None:
            return ()
        if self.devices and Device.CUDA not in self.devices:
            return ()
        from gpudoctor.kernel.sanitize import sanitize

        gpu_runs = [p.invocation for p in self.plan(context.environment, context.python, context.scratch)
                    if p.invocation.device is Device.CUDA]  # fmt: skip
        first = [i for i in gpu_runs if i.gpu_label == gpu_runs[0].gpu_label] if gpu_runs else []
        results = sanitize(first, context.environment, dict(os.environ), context.scratch, context.cancel)
        for result in results:
            context.events.ended(result)
        return results

    def concluded(self, report: Report) -> Report:
        return report

    def section(self, environment: Environment, results: Sequence[ProbeResult]) -> KernelSection | None:
        return kernel_section(self.package, self.scan, self.calls, check_source(self.package, environment.packages))

    def fingerprint(self) -> Fingerprint:
        return Fingerprint(
            {
                "only": None,
                "timeout_s": self.timeout_s,
                "kernel": str(self.package),
                "kernel_calls": [repr(r) for r in self.requests],
                "sanitize": self.sanitize,
            }
        )


@dataclass(frozen=True)
class CpuRunEnded(ScheduleHandler):
    """Marks the CPU kernel run's end with a file: the GPU runs may compare now (or know there is nothing to
    compare with)."""

    marker: Path

    def on_result(self, schedule: Schedule, run: ScheduledRun, result: ProbeResult) -> None:
        if result.id == f"{KERNEL_PROBE}/{Device.CPU.value}":
            self.marker.touch()
