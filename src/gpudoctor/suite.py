"""Plan which probe variants run, in what order, and run them, concurrently where stages allow.

A variant whose prerequisite did not pass is skipped with that reason; results stream to a callback.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Device, Environment, Outcome, ProbeResult, ProbeSpec
from gpudoctor.runner import ProbeInvocation, run_probe, skipped_result


@dataclass(frozen=True)
class PlannedRun:
    """One probe variant to run, the run ids it waits for, and a reason to skip it known before running."""

    invocation: ProbeInvocation
    prerequisites: tuple[str, ...]
    skip_reason: str | None = None
    runs_after: tuple[str, ...] = ()  # run ids that must finish first, whatever their outcome

    @property
    def run_id(self) -> str:
        return self.invocation.run_id


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


ResultCallback = Callable[[ProbeResult], None]
StartCallback = Callable[[PlannedRun], None]


def run_plan(
    plan: Sequence[PlannedRun],
    *,
    jobs: int = 1,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
) -> tuple[ProbeResult, ...]:
    """Run the plan with at most ``jobs`` probe processes at once; results come back in plan order."""
    if jobs < 1:
        raise GpuDoctorError(f"--jobs must be at least 1, not {jobs}")
    results: dict[str, ProbeResult] = {}
    waiting = list(plan)
    planned_ids = {p.run_id for p in plan}
    lock = threading.Lock()

    def record(result: ProbeResult) -> None:
        with lock:
            results[result.id] = result
        if on_result is not None:
            on_result(result)

    def blocking_reason(run: PlannedRun) -> str | None:
        for prerequisite in run.prerequisites:
            if prerequisite not in planned_ids:
                continue  # filtered out by --device: nothing to wait for
            outcome = results[prerequisite].outcome
            if outcome is not Outcome.PASS:
                return f"prerequisite {prerequisite} did not pass ({outcome.value})"
        return None

    def ready(run: PlannedRun) -> bool:
        return all(p in results or p not in planned_ids for p in (*run.prerequisites, *run.runs_after))

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="probe") as pool:
        running: dict[concurrent.futures.Future[ProbeResult], PlannedRun] = {}
        while waiting or running:
            progressed = True
            while progressed:  # settle every run whose fate is known without starting a process
                progressed = False
                for run in list(waiting):
                    if not ready(run):
                        continue
                    reason = run.skip_reason or blocking_reason(run)
                    if reason is not None:
                        waiting.remove(run)
                        record(skipped_result(run.invocation, reason))
                        progressed = True
                    elif len(running) < jobs:
                        waiting.remove(run)
                        if on_start is not None:
                            on_start(run)
                        running[pool.submit(run_probe, run.invocation)] = run
            if not running:
                if waiting:  # cannot happen with a validated, acyclic catalog; fail loudly if it does
                    raise GpuDoctorError("probe plan is stuck: " + ", ".join(r.run_id for r in waiting))
                break
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                running.pop(future)
                record(future.result())
    return tuple(results[p.run_id] for p in plan)
