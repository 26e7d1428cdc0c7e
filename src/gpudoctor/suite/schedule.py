"""Plan which probe variants run, in what order, and run them, concurrently where stages allow.

A variant whose prerequisite did not pass is skipped with that reason; results stream to a callback.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Device, Environment, Outcome, ProbeResult, ProbeSpec
from gpudoctor.process.cancel import CancelScope
from gpudoctor.suite.runner import ProbeInvocation, interrupted_result, run_probe, skipped_result


@dataclass(frozen=True)
class PlannedRun:
    """One probe variant to run, the run ids it waits for, and a reason to skip it known before running."""

    invocation: ProbeInvocation
    prerequisites: tuple[str, ...]
    skip_reason: str | None = None

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


OUTCOME_VERBS = {
    Outcome.FAIL: "failed",
    Outcome.CRASH: "crashed",
    Outcome.TIMEOUT: "timed out",
    Outcome.SKIPPED: "was skipped",
    Outcome.INTERRUPTED: "was interrupted",
    Outcome.PASS: "passed",
}
OWN_REASON_CHARS = 160  # a prerequisite's own skip reason, quoted: the compiler's first error can be long


def prerequisite_reason(
    prerequisite: str, result: ProbeResult, root: str | None, results: Mapping[str, ProbeResult]
) -> str:
    """Why a run cannot run: the prerequisite's outcome as the report shows it, and for a skipped prerequisite,
    the run at the root of the chain (``root``, with its outcome from ``results``) or the prerequisite's own
    reason. The words name each run's outcome exactly as its result does, so the report never contradicts it."""
    said = f"prerequisite {prerequisite} {OUTCOME_VERBS[result.outcome]}"
    if result.outcome is not Outcome.SKIPPED:
        return said
    if root is not None and root in results and root != prerequisite:
        cause = results[root]
        own = "" if cause.outcome is not Outcome.SKIPPED else f" ({_shortened(cause.skip_reason or cause.summary)})"
        return f"{said}, because {root} {OUTCOME_VERBS[cause.outcome]}{own}"
    return f"{said} ({_shortened(result.skip_reason or result.summary)})"


def _shortened(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else "no reason given"
    return first if len(first) <= OWN_REASON_CHARS else first[: OWN_REASON_CHARS - 1] + "…"


ResultCallback = Callable[[ProbeResult], None]
StartCallback = Callable[[PlannedRun], None]


def start_order(run: PlannedRun, expected: Mapping[str, float]) -> tuple[int, float]:
    """Sort key of a run's start: runs with no learned duration first (a new probe, a first run on this machine,
    a run that did not end last time: each may be long), later stages first among them (they build on more:
    MAX's compiles come in stages 3 and 4); then the others, longest expected (``expected``: seconds per run
    id, from earlier runs) first."""
    learned = expected.get(run.run_id)
    return (0, -float(run.invocation.spec.stage)) if learned is None else (1, -learned)


def run_plan(
    plan: Sequence[PlannedRun],
    *,
    jobs: int = 1,
    on_start: StartCallback | None = None,
    on_result: ResultCallback | None = None,
    speculative: bool = True,
    cancel: CancelScope | None = None,
    given: Mapping[str, ProbeResult] | None = None,
    expected: Mapping[str, float] | None = None,
) -> tuple[ProbeResult, ...]:
    """Run the plan with at most ``jobs`` probe processes at once; results come back in plan order.

    Speculative (the default): a run does not wait for its prerequisites to pass before starting; its
    result is held until they end. If a prerequisite does not pass, the run is stopped if still running and
    reported as skipped with that reason, exactly as if it had waited. The outcome of every run is the same
    as in the cautious order; only the wall time shrinks (prerequisite chains no longer add up).

    ``given`` holds results already known (a rerun keeps them): those runs are not started again, and what
    builds on them sees their outcome. Cancelling ``cancel`` kills every running probe at once; runs not yet
    ended come back INTERRUPTED, and results that had ended are kept.

    With more than one job, runs start in the order of ``start_order``: the suite is as fast as its slowest
    chain, so the slow ones must not start last. One job at a time keeps the plan order (prerequisites
    first): the total is the same in any order, and a prerequisite that fails first spares its dependents.
    """
    if jobs < 1:
        raise GpuDoctorError(f"--jobs must be at least 1, not {jobs}")
    session = cancel if cancel is not None else CancelScope()
    final: dict[str, ProbeResult] = {}  # results whose prerequisites have all ended
    held: dict[str, ProbeResult] = {}  # ended, but a prerequisite is still running
    known = dict(given or {})
    waiting = [p for p in plan if p.run_id not in known]
    if jobs > 1:
        waiting.sort(key=lambda run: start_order(run, expected or {}))  # stable: plan order among equals
    by_id = {p.run_id: p for p in plan}
    scopes: dict[str, CancelScope] = {}
    stopped: set[str] = set()  # runs killed because a prerequisite failed while they ran ahead of it
    gate_roots: dict[str, str] = {}  # run skipped by the gate -> the run at the root of its chain of prerequisites

    def prerequisites(run: PlannedRun) -> list[str]:
        return [p for p in run.prerequisites if p in by_id]  # --device may have filtered some out

    def blocked_by(run: PlannedRun) -> str | None:
        """The first prerequisite that ended without passing (an interrupted one blocks nothing: see below)."""
        blocking = (Outcome.PASS, Outcome.INTERRUPTED)
        return next((p for p in prerequisites(run) if p in final and final[p].outcome not in blocking), None)

    def skip_for(run: PlannedRun, cause: str) -> str:
        """The reason ``run`` is skipped because ``cause`` did not pass; remembers the run at the root of the chain
        of skipped prerequisites, which the reasons of what builds on ``run`` name."""
        gate_roots[run.run_id] = gate_roots.get(cause, cause)
        return prerequisite_reason(cause, final[cause], gate_roots.get(cause), final)

    def interrupted_prerequisite(run: PlannedRun) -> str | None:
        return next((p for p in prerequisites(run) if p in final and final[p].outcome is Outcome.INTERRUPTED), None)

    def may_start(run: PlannedRun) -> bool:
        return speculative or all(p in final for p in prerequisites(run))

    def finish(run_id: str, result: ProbeResult, announce: bool = True) -> None:
        final[run_id] = result
        if on_result is not None and announce:
            on_result(result)

    def settle() -> bool:
        """Finalise held results and skip what can no longer run; True if anything changed."""
        changed = False
        for run_id, result in list(held.items()):
            run = by_id[run_id]
            if (cause := blocked_by(run)) is not None:
                del held[run_id]
                reason = skip_for(run, cause)
                ahead = (
                    "this run had started ahead of it and was stopped"
                    if run_id in stopped
                    else "this run had started ahead of it, and its result is left out: it means something only "
                    "once that prerequisite passes"
                )
                finish(run_id, skipped_result(run.invocation, f"{reason}; {ahead}"))
                changed = True
            elif all(p in final for p in prerequisites(run)):
                del held[run_id]
                if (cut := interrupted_prerequisite(run)) is not None and result.outcome is not Outcome.INTERRUPTED:
                    # As if it had waited: it would never have started, so its own ending is not counted.
                    reason = f"prerequisite {cut} was interrupted, so this run is not counted although it had ended"
                    result = interrupted_result(run.invocation, reason, result.duration_s)
                finish(run_id, result)
                changed = True
        for run_id, scope in scopes.items():
            if not scope.cancelled and blocked_by(by_id[run_id]) is not None:
                stopped.add(run_id)
                scope.cancel("a prerequisite failed while it ran ahead")
        for run in list(waiting):
            cause = None if run.skip_reason else blocked_by(run)
            why = run.skip_reason or (skip_for(run, cause) if cause is not None else None)
            if why is None and session.cancelled:
                waiting.remove(run)
                finish(run.run_id, interrupted_result(run.invocation, f"not started: {session.reason}"))
                changed = True
            elif why is not None:
                waiting.remove(run)
                finish(run.run_id, skipped_result(run.invocation, why))
                changed = True
        return changed

    for run_id, result in known.items():
        if run_id in by_id:
            finish(run_id, result, announce=False)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="probe") as pool:
        running: dict[concurrent.futures.Future[ProbeResult], PlannedRun] = {}
        while waiting or running or held:
            while settle():
                pass
            for run in list(waiting):
                if len(running) >= jobs or session.cancelled:
                    break
                if may_start(run):
                    waiting.remove(run)
                    if on_start is not None:
                        on_start(run)
                    scopes[run.run_id] = session.child()
                    running[pool.submit(run_probe, run.invocation, scopes[run.run_id])] = run
            if not running:
                if waiting or held:  # cannot happen with a validated, acyclic catalog; fail loudly if it does
                    if session.cancelled:
                        continue  # settle() marks what is left interrupted
                    stuck = [r.run_id for r in waiting] + list(held)
                    raise GpuDoctorError("probe plan is stuck: " + ", ".join(stuck))
                break
            done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                run = running.pop(future)
                scopes.pop(run.run_id, None)
                held[run.run_id] = future.result()
    return tuple(final[p.run_id] for p in plan)
