"""Plan which probe variants run and what each waits for: catalog order, prerequisites first.

A variant that cannot run here for a reason known before starting it (no CUDA device, a missing package) says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Device, Environment, ProbeResult, ProbeSpec
from gpudoctor.suite.runner import ProbeInvocation


@dataclass(frozen=True)
class PlannedRun:
    """One probe variant to run, the run ids it waits for, and a reason to skip it known before running.

    ``label`` marks a run that is not the stack as it is (``"with patch ID"``): its result's summary starts with
    it wherever the result is shown.
    """

    invocation: ProbeInvocation
    prerequisites: tuple[str, ...]
    skip_reason: str | None = None
    label: str | None = None

    @property
    def run_id(self) -> str:
        return self.invocation.run_id

    def shown(self, result: ProbeResult) -> ProbeResult:
        """``result`` as faces and the report show it: its summary labelled when this run has a label."""
        return result if self.label is None else dataclasses.replace(result, summary=f"{self.label}: {result.summary}")


def no_cuda_reason(environment: Environment) -> str:
    if not environment.driver.available:
        return f"no CUDA device ({environment.driver.status})"
    if not environment.driver.gpus:
        return "no CUDA device (the driver reports no GPU)"
    return "no CUDA device (CUDA_VISIBLE_DEVICES hides every GPU)"


def _prerequisite_run_ids(spec: ProbeSpec, device: Device, by_id: dict[str, ProbeSpec]) -> tuple[str, ...]:
    ids: list[str] = []
    for name in spec.after:
        other = by_id[name]
        if device in other.devices:
            ids.append(other.run_id(device))
        elif Device.NONE in other.devices:
            ids.append(other.id)
        else:  # a device-less probe builds on the CPU variant, the control that runs everywhere
            ids.append(other.run_id(Device.CPU if Device.CPU in other.devices else other.devices[0]))
    return tuple(ids)


def _with_prerequisites(specs: Sequence[ProbeSpec], only: Iterable[str]) -> set[str]:
    by_id = {s.id: s for s in specs}
    wanted: set[str] = set()
    pending = list(only)
    while pending:
        name = pending.pop()
        if name not in by_id:
            raise GpuDoctorError(f"unknown probe {name!r}", hint="known probes: " + ", ".join(sorted(by_id)))
        if name not in wanted:
            wanted.add(name)
            pending.extend(by_id[name].after)
    return wanted


def _topological(specs: Sequence[ProbeSpec]) -> list[ProbeSpec]:
    """Catalog order, stable, except that a probe always comes after what it builds on."""
    by_id = {s.id: s for s in specs}
    ordered: list[ProbeSpec] = []
    state: dict[str, str] = {}

    def visit(spec: ProbeSpec, chain: tuple[str, ...]) -> None:
        if state.get(spec.id) == "done":
            return
        if state.get(spec.id) == "visiting":
            raise GpuDoctorError("probe prerequisites form a cycle: " + " -> ".join((*chain, spec.id)))
        state[spec.id] = "visiting"
        for name in spec.after:
            if name in by_id:
                visit(by_id[name], (*chain, spec.id))
        state[spec.id] = "done"
        ordered.append(spec)

    for spec in sorted(specs, key=lambda s: s.stage):
        visit(spec, ())
    return ordered


def plan_runs(
    specs: Sequence[ProbeSpec],
    environment: Environment,
    *,
    python: str,
    probe_dir: Path,
    only: Iterable[str] | None = None,
    devices: Iterable[Device] | None = None,
    timeout_s: float | None = None,
) -> list[PlannedRun]:
    """Every variant to run, ordered so that prerequisites come first."""
    selected = specs if only is None else [s for s in specs if s.id in _with_prerequisites(specs, only)]
    allowed = set(devices) | {Device.NONE} if devices is not None else None
    by_id = {s.id: s for s in specs}
    plan: list[PlannedRun] = []
    for spec in _topological(selected):
        for device in spec.devices:
            if allowed is not None and device not in allowed:
                continue
            invocation = ProbeInvocation(
                spec=spec,
                device=device,
                python=python,
                probe_dir=probe_dir,
                timeout_s=timeout_s or spec.timeout_s,
                cache_key=f"max-{environment.packages.get('max')}" if environment.packages.get("max") else None,
            )
            reason = known_skip_reason(spec, device, environment)
            plan.append(PlannedRun(invocation, _prerequisite_run_ids(spec, device, by_id), reason))
    return plan


def known_skip_reason(spec: ProbeSpec, device: Device, environment: Environment) -> str | None:
    """Why this variant cannot run here, known before starting it, or None."""
    if device is Device.CUDA and not environment.cuda_device_visible:
        return no_cuda_reason(environment)  # the more basic reason comes first
    missing = [name for name in spec.needs_packages if not environment.packages.get(name)]
    return "missing package: " + ", ".join(missing) if missing else None
