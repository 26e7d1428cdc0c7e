"""The schedule of probe runs as an object with named transitions, and the loop that drives it with processes.

Runs come in rounds (the plan; runs added while it runs); a run that builds on one that did not pass is skipped.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Outcome, ProbeResult
from gpudoctor.process.cancel import CancelScope
from gpudoctor.suite.plan import PlannedRun
from gpudoctor.suite.runner import interrupted_result, run_probe, skipped_result

OUTCOME_VERBS = {
    Outcome.FAIL: "failed",
    Outcome.CRASH: "crashed",
    Outcome.TIMEOUT: "timed out",
    Outcome.SKIPPED: "was skipped",
    Outcome.INTERRUPTED: "was interrupted",
    Outcome.PASS: "passed",
}
OWN_REASON_CHARS = 160  # a prerequisite's own skip reason, quoted: the compiler's first error can be long
STOPPED_AHEAD = "this run had started ahead of it and was stopped"
LEFT_OUT_AHEAD = (
    "this run had started ahead of it, and its result is left out: it means something only once that prerequisite "
    "passes"
)


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


def start_order(run: PlannedRun, expected: Mapping[str, float]) -> tuple[int, float, float]:
    """Sort key of a run's start: runs with no learned duration first (a new probe, a first run on this machine,
    a run that did not end last time: each may be long), later stages first among them (they build on more:
    MAX's compiles come in stages 3 and 4), and within a stage the longer time limit first (the catalog gives the
    compiling probes more: cpp-extension's 600 s against max-import's 180 s, so a first run on 16 CPUs no longer
    queues the extension build behind the imports); then the others, longest expected (``expected``: seconds per
    run id, from earlier runs) first."""
    learned = expected.get(run.run_id)
    spec = run.invocation.spec
    return (0, -float(spec.stage), -spec.timeout_s) if learned is None else (1, -learned, 0.0)


@dataclass(frozen=True)
class ScheduledRun:
    """A planned run as the schedule holds it: its round (0 is the plan; later ones were added as it ran)."""

    round: int
    run: PlannedRun

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def key(self) -> tuple[int, str]:
        return (self.round, self.run.run_id)


Settled = list[tuple[ScheduledRun, ProbeResult]]  # results that became final, in the order they did


class _Round:
    """Runs gated among themselves: a run's prerequisites are runs of its round, or results given to it."""

    def __init__(
        self, runs: Sequence[PlannedRun], given: Mapping[str, ProbeResult], order: Mapping[str, float] | None
    ) -> None:
        self.order = [run.run_id for run in runs]
        self.runs = {run.run_id: run for run in runs}
        self.final = {run_id: result for run_id, result in given.items() if run_id in self.runs}
        self.held: dict[str, ProbeResult] = {}  # ended, but a prerequisite has not
        self.waiting = [run for run in runs if run.run_id not in self.final]
        if order is not None:
            self.waiting.sort(key=lambda run: start_order(run, order))  # stable: plan order among equals
        self.stopped: set[str] = set()  # killed because a prerequisite failed while they ran ahead of it
        self.gate_roots: dict[str, str] = {}  # skipped by the gate -> the run at the root of its chain

    def prerequisites(self, run: PlannedRun) -> list[str]:
        return [p for p in run.prerequisites if p in self.runs]  # --device may have filtered some out

    def blocked_by(self, run: PlannedRun) -> str | None:
        """The first prerequisite that ended without passing (an interrupted one blocks nothing: see settle)."""
        final, passing = self.final, (Outcome.PASS, Outcome.INTERRUPTED)
        return next((p for p in self.prerequisites(run) if p in final and final[p].outcome not in passing), None)

    def may_start(self, run: PlannedRun, speculative: bool) -> bool:
        if run.skip_reason is not None or self.blocked_by(run) is not None:
            return False  # settle() skips it
        return speculative or all(p in self.final for p in self.prerequisites(run))

    def skip_for(self, run: PlannedRun, cause: str) -> str:
        """Why ``run`` is skipped because ``cause`` did not pass; remembers the run at the root of the chain of
        skipped prerequisites, which the reasons of what builds on ``run`` name."""
        self.gate_roots[run.run_id] = self.gate_roots.get(cause, cause)
        return prerequisite_reason(cause, self.final[cause], self.gate_roots.get(cause), self.final)

    def finish(self, run_id: str, result: ProbeResult) -> tuple[PlannedRun, ProbeResult]:
        self.final[run_id] = result
        return self.runs[run_id], result

    def settle_held(self) -> list[tuple[PlannedRun, ProbeResult]]:
        """Results whose prerequisites have all ended become final: skipped when one did not pass, not counted
        when one was interrupted (as if it had waited: it would never have started)."""
        settled = []
        for run_id, result in list(self.held.items()):
            run = self.runs[run_id]
            if (cause := self.blocked_by(run)) is not None:
                ahead = STOPPED_AHEAD if run_id in self.stopped else LEFT_OUT_AHEAD
                result = skipped_result(run.invocation, f"{self.skip_for(run, cause)}; {ahead}")
            elif not all(p in self.final for p in self.prerequisites(run)):
                continue
            elif (cut := self._interrupted_prerequisite(run)) is not None and result.outcome is not Outcome.INTERRUPTED:
                reason = f"prerequisite {cut} was interrupted, so this run is not counted although it had ended"
                result = interrupted_result(run.invocation, reason, result.duration_s)
            del self.held[run_id]
            settled.append(self.finish(run_id, result))
        return settled

    def _interrupted_prerequisite(self, run: PlannedRun) -> str | None:
        final, cut = self.final, Outcome.INTERRUPTED
        return next((p for p in self.prerequisites(run) if p in final and final[p].outcome is cut), None)

    def settle_waiting(self, stopped: str | None) -> list[tuple[PlannedRun, ProbeResult]]:
        """Waiting runs that will never start: skipped (a known reason, a prerequisite that did not pass), or
        interrupted once the schedule is stopped."""
        settled = []
        for run in list(self.waiting):
            cause = None if run.skip_reason else self.blocked_by(run)
            why = run.skip_reason or (self.skip_for(run, cause) if cause is not None else None)
            if why is None and stopped is None:
                continue
            self.waiting.remove(run)
            if why is not None:
                ending = skipped_result(run.invocation, why)
            else:
                ending = interrupted_result(run.invocation, f"not started: {stopped}")
            settled.append(self.finish(run.run_id, ending))
        return settled


class Schedule:
    """Which runs may start, which results are final, and what can no longer run; no processes of its own.

    Speculative (the default): a run does not wait for its prerequisites to pass before starting; its result is
    held until they end. If a prerequisite does not pass, the run is stopped if still running and reported as
    skipped with that reason, exactly as if it had waited. Every outcome is the same as in the cautious order;
    only the wall time shrinks (prerequisite chains no longer add up).

    ``given`` holds results already known (a rerun keeps them): those runs are not started again, and what builds
    on them sees their outcome. Stopping (``stop``, or cancelling ``cancel``) kills every running probe at once;
    runs not yet ended come back INTERRUPTED, and results that had ended are kept.

    With more than one job, runs start in the order of ``start_order``: the suite is as fast as its slowest
    chain, so the slow ones must not start last. One job at a time keeps the plan order (prerequisites first):
    the total is the same in any order, and a prerequisite that fails first spares its dependents.
    """

    def __init__(
        self,
        plan: Sequence[PlannedRun],
        *,
        jobs: int = 1,
        given: Mapping[str, ProbeResult] | None = None,
        expected: Mapping[str, float] | None = None,
        speculative: bool = True,
        cancel: CancelScope | None = None,
    ) -> None:
        if jobs < 1:
            raise GpuDoctorError(f"--jobs must be at least 1, not {jobs}")
        self.jobs = jobs
        self.speculative = speculative
        self._order = dict(expected or {}) if jobs > 1 else None
        self._scope = cancel.child() if cancel is not None else CancelScope()
        self._rounds: list[_Round] = []
        self._running: dict[tuple[int, str], CancelScope] = {}
        self.add(plan, given=given)

    def add(self, runs: Sequence[PlannedRun], *, given: Mapping[str, ProbeResult] | None = None) -> int:
        """A new round of runs, gated among themselves and by ``given``; its number."""
        self._rounds.append(_Round(runs, given or {}, self._order))
        return len(self._rounds) - 1

    def ready(self) -> list[ScheduledRun]:
        """The runs to start now, in start order, as many as free job slots allow (none once stopped)."""
        free = 0 if self.stopped is not None else self.jobs - len(self._running)
        chosen: list[ScheduledRun] = []
        for number, round_ in enumerate(self._rounds):
            for run in round_.waiting:
                if len(chosen) >= free:
                    return chosen
                if round_.may_start(run, self.speculative):
                    chosen.append(ScheduledRun(number, run))
        return chosen

    def started(self, run: ScheduledRun) -> CancelScope:
        """``run`` has started; the scope to run it under (cancelled when a prerequisite fails, or on stop)."""
        round_ = self._rounds[run.round]
        if all(waiting.run_id != run.run_id for waiting in round_.waiting):
            raise GpuDoctorError(f"{run.run_id} (round {run.round}) is not waiting to start")
        round_.waiting = [waiting for waiting in round_.waiting if waiting.run_id != run.run_id]
        scope = self._running[run.key] = self._scope.child()
        return scope

    def ended(self, run: ScheduledRun, result: ProbeResult) -> None:
        """``run``'s process ended with ``result``; it becomes final once its prerequisites have (``settle``)."""
        if self._running.pop(run.key, None) is None:
            raise GpuDoctorError(f"{run.run_id} (round {run.round}) is not running")
        self._rounds[run.round].held[run.run_id] = result

    def settle(self) -> Settled:
        """Finalise held results, stop runs a failed prerequisite made pointless, and skip (or, once stopped,
        interrupt) what can no longer run; the results that became final, until nothing changes."""
        settled: Settled = []
        while True:
            changed: Settled = []
            for number, round_ in enumerate(self._rounds):
                changed += [(ScheduledRun(number, run), result) for run, result in round_.settle_held()]
                self._stop_blocked(number, round_)
                changed += [(ScheduledRun(number, run), result) for run, result in round_.settle_waiting(self.stopped)]
            if not changed:
                return settled
            settled += changed

    def _stop_blocked(self, number: int, round_: _Round) -> None:
        for (running_round, run_id), scope in self._running.items():
            if running_round == number and not scope.cancelled and round_.blocked_by(round_.runs[run_id]) is not None:
                round_.stopped.add(run_id)
                scope.cancel("a prerequisite failed while it ran ahead")

    def stop(self, reason: str) -> None:
        """Stop: every running probe is killed, and nothing starts any more."""
        self._scope.cancel(reason)

    @property
    def stopped(self) -> str | None:
        """Why the schedule was stopped, or None."""
        return (self._scope.reason or "cancelled") if self._scope.cancelled else None

    @property
    def finished(self) -> bool:
        """Nothing running, waiting or held: every run of every round has its final result."""
        return not self._running and all(not r.waiting and not r.held for r in self._rounds)

    def stuck(self) -> list[str]:
        """The runs that can neither start nor end (none, with a validated, acyclic catalog)."""
        return [run.run_id for r in self._rounds for run in r.waiting] + [i for r in self._rounds for i in r.held]

    def runs(self, round_: int = 0) -> list[PlannedRun]:
        return [self._rounds[round_].runs[run_id] for run_id in self._rounds[round_].order]

    def known(self, round_: int = 0) -> dict[str, ProbeResult]:
        """The results of a round final so far (given ones included), as they were produced."""
        return dict(self._rounds[round_].final)

    def results(self, round_: int = 0) -> tuple[ProbeResult, ...]:
        """A finished round's results in its runs' order, as faces and the report show them."""
        chosen = self._rounds[round_]
        return tuple(chosen.runs[run_id].shown(chosen.final[run_id]) for run_id in chosen.order)


class ScheduleHandler:
    """Hears a schedule as it runs: each run as it starts, each result once final (and may add runs), and the
    moment nothing is left (and may add more). The defaults hear nothing."""

    def on_start(self, schedule: Schedule, run: ScheduledRun) -> None:
        return None

    def on_result(self, schedule: Schedule, run: ScheduledRun, result: ProbeResult) -> None:
        return None

    def on_idle(self, schedule: Schedule) -> None:
        return None


ResultCallback = Callable[[ProbeResult], None]
StartCallback = Callable[[PlannedRun], None]


@dataclass(frozen=True)
class FaceCallbacks(ScheduleHandler):
    """A face's callbacks: each run as it starts, each result as the report shows it (a patched run labelled)."""

    start: StartCallback | None = None
    result: ResultCallback | None = None

    def on_start(self, schedule: Schedule, run: ScheduledRun) -> None:
        if self.start is not None:
            self.start(run.run)

    def on_result(self, schedule: Schedule, run: ScheduledRun, result: ProbeResult) -> None:
        if self.result is not None:
            self.result(run.run.shown(result))


def run_schedule(schedule: Schedule, handlers: Sequence[ScheduleHandler] = ()) -> None:
    """Run ``schedule`` to its end, each run a probe process, at most ``schedule.jobs`` at once."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=schedule.jobs, thread_name_prefix="probe") as pool:
        running: dict[concurrent.futures.Future[ProbeResult], ScheduledRun] = {}
        try:
            while True:
                for run, result in schedule.settle():
                    for handler in handlers:
                        handler.on_result(schedule, run, result)
                if schedule.finished:
                    for handler in handlers:
                        handler.on_idle(schedule)
                    if schedule.finished:
                        return
                    continue  # what they added is settled first
                for run in schedule.ready():
                    for handler in handlers:
                        handler.on_start(schedule, run)
                    running[pool.submit(run_probe, run.run.invocation, schedule.started(run))] = run
                if not running and not schedule.finished and schedule.stopped is None:
                    raise GpuDoctorError("probe plan is stuck: " + ", ".join(schedule.stuck()))
                done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    schedule.ended(running.pop(future), future.result())
        except BaseException:
            schedule.stop("the doctor stopped on an error")  # no probe outlives the run that started it
            raise


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
    """The plan alone, run to its end (see ``Schedule``); its results in plan order."""
    schedule = Schedule(plan, jobs=jobs, given=given, expected=expected, speculative=speculative, cancel=cancel)
    run_schedule(schedule, [FaceCallbacks(on_start, on_result)])
    return schedule.results()
