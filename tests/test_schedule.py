"""The schedule's transitions as a pure object: runs planned and results given by hand, no process started.

``ready`` / ``started`` / ``ended`` / ``settle`` / ``stop`` / ``results``, rounds added while it runs, and the loop
that drives it with real processes only at the end (``run_schedule`` with handlers that add runs).
"""

from __future__ import annotations

import sys

import pytest
from conftest import SYNTHETIC

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Device, Outcome, ProbeResult, ProbeSpec
from gpudoctor.suite.plan import PlannedRun
from gpudoctor.suite.runner import ProbeInvocation
from gpudoctor.suite.schedule import (
    FaceCallbacks,
    Schedule,
    ScheduledRun,
    ScheduleHandler,
    run_schedule,
    start_order,
)


def _run(name: str, *after: str, stage: int = 1, skip: str | None = None, script: str = "passes.py") -> PlannedRun:
    spec = ProbeSpec(id=name, script=script, title=name, stage=stage, after=after)
    return PlannedRun(ProbeInvocation(spec, Device.NONE, sys.executable, SYNTHETIC, 60), after, skip)


def _result(run: ScheduledRun | PlannedRun, outcome: Outcome = Outcome.PASS, duration_s: float = 1.0) -> ProbeResult:
    planned = run.run if isinstance(run, ScheduledRun) else run
    return ProbeResult(
        id=planned.run_id, probe=planned.invocation.spec.id, device=Device.NONE, outcome=outcome,
        duration_s=duration_s, summary=outcome.value,
    )  # fmt: skip


def _ids(runs: list[ScheduledRun]) -> list[str]:
    return [run.run_id for run in runs]


def _settled(schedule: Schedule) -> dict[str, ProbeResult]:
    return {run.run_id: result for run, result in schedule.settle()}


def _start(schedule: Schedule, name: str, round_: int = 0) -> ScheduledRun:
    (run,) = [run for run in schedule.ready() if run.run_id == name and run.round == round_]
    schedule.started(run)
    return run


def test_one_job_starts_the_plan_in_order_and_one_at_a_time() -> None:
    schedule = Schedule([_run("a"), _run("b"), _run("c")], jobs=1)
    assert _ids(schedule.ready()) == ["a"]
    a = _start(schedule, "a")
    assert schedule.ready() == []  # the one slot is taken
    schedule.ended(a, _result(a))
    assert _settled(schedule) == {"a": _result(a)}
    assert _ids(schedule.ready()) == ["b"]


def test_more_jobs_start_the_longest_expected_first_and_new_runs_before_them() -> None:
    plan = [_run("short", stage=3), _run("long", stage=3), _run("new-early", stage=1), _run("new-late", stage=4)]
    schedule = Schedule(plan, jobs=2, expected={"short": 1.0, "long": 9.0})
    assert _ids(schedule.ready()) == ["new-late", "new-early"]
    _start(schedule, "new-late")
    assert _ids(schedule.ready()) == ["new-early"]


def test_a_first_run_starts_the_runs_given_longer_time_limits_first_within_a_stage() -> None:
    """On a first run the catalog's time limit stands for how long a run may take: the H100's first run used to queue
    the compiling adjacent-stack probes (cpp-extension: 600 s) behind the imports of their stage (180 s)."""

    def run(name: str, stage: int, timeout_s: float) -> PlannedRun:
        spec = ProbeSpec(id=name, script="passes.py", title=name, stage=stage, timeout_s=timeout_s)
        return PlannedRun(ProbeInvocation(spec, Device.NONE, sys.executable, SYNTHETIC, 60), ())

    plan = [run("import", 2, 180), run("compile", 2, 600), run("later-stage", 3, 180), run("learned", 4, 600)]
    schedule = Schedule(plan, jobs=2, expected={"learned": 30.0})
    assert _ids(schedule.ready()) == ["later-stage", "compile"]
    _start(schedule, "later-stage")
    _start(schedule, "compile")
    assert schedule.ready() == []
    assert [run.run_id for run in sorted(plan, key=lambda r: start_order(r, {"learned": 30.0}))] == [
        "later-stage", "compile", "import", "learned"
    ]  # fmt: skip


def test_a_speculative_dependent_starts_at_once_and_its_result_waits_for_the_prerequisite() -> None:
    schedule = Schedule([_run("base"), _run("top", "base")], jobs=2)
    assert _ids(schedule.ready()) == ["base", "top"]
    base, top = _start(schedule, "base"), _start(schedule, "top")
    schedule.ended(top, _result(top))
    assert _settled(schedule) == {}  # held: it means something only once base has passed
    schedule.ended(base, _result(base))
    assert list(_settled(schedule)) == ["base", "top"]
    assert schedule.finished and [r.outcome for r in schedule.results()] == [Outcome.PASS, Outcome.PASS]


def test_a_cautious_dependent_waits_for_its_prerequisite_to_end() -> None:
    schedule = Schedule([_run("base"), _run("top", "base")], jobs=2, speculative=False)
    assert _ids(schedule.ready()) == ["base"]
    base = _start(schedule, "base")
    schedule.ended(base, _result(base))
    schedule.settle()
    assert _ids(schedule.ready()) == ["top"]


def test_a_failed_prerequisite_stops_the_dependent_running_ahead_and_skips_it() -> None:
    schedule = Schedule([_run("base"), _run("top", "base"), _run("later", "top")], jobs=2)
    base = _start(schedule, "base")
    (top,) = [run for run in schedule.ready() if run.run_id == "top"]
    scope = schedule.started(top)  # the scope the driver runs ``top`` under
    schedule.ended(base, _result(base, Outcome.CRASH))
    assert list(_settled(schedule)) == ["base"]
    assert scope.cancelled and scope.reason == "a prerequisite failed while it ran ahead"
    schedule.ended(top, _result(top, Outcome.INTERRUPTED))  # what the killed process comes back as
    settled = _settled(schedule)
    assert settled["top"].outcome is Outcome.SKIPPED
    assert settled["top"].skip_reason == "prerequisite base crashed; this run had started ahead of it and was stopped"
    assert settled["later"].skip_reason == "prerequisite top was skipped, because base crashed"  # never started
    assert schedule.finished


def test_a_result_that_ended_before_its_failed_prerequisite_is_left_out() -> None:
    schedule = Schedule([_run("base"), _run("top", "base")], jobs=2)
    base, top = _start(schedule, "base"), _start(schedule, "top")
    schedule.ended(top, _result(top))
    schedule.ended(base, _result(base, Outcome.TIMEOUT))
    top_result = _settled(schedule)["top"]
    assert top_result.skip_reason is not None
    assert top_result.skip_reason.startswith("prerequisite base timed out; this run had started ahead of it, and")


def test_a_known_skip_reason_skips_without_starting_and_gates_what_builds_on_it() -> None:
    schedule = Schedule([_run("needs-gpu", skip="no CUDA device (no driver)"), _run("after", "needs-gpu")], jobs=2)
    assert _ids(schedule.ready()) == ["after"]  # speculative: it may start ahead of a run merely waiting
    settled = _settled(schedule)  # ... but the loop settles first, and then neither runs
    assert settled["needs-gpu"].skip_reason == "no CUDA device (no driver)"
    assert settled["after"].skip_reason == "prerequisite needs-gpu was skipped (no CUDA device (no driver))"
    assert schedule.ready() == [] and schedule.finished


def test_stop_interrupts_what_had_not_started_and_keeps_what_ended() -> None:
    schedule = Schedule([_run("a"), _run("b"), _run("c", "a")], jobs=2)
    a = _start(schedule, "a")
    (b,) = [run for run in schedule.ready() if run.run_id == "b"]
    scope = schedule.started(b)
    schedule.ended(a, _result(a))
    schedule.stop("quit")
    assert schedule.stopped == "quit" and schedule.ready() == []
    assert scope.cancelled and scope.reason == "quit"  # the running probe is killed with the schedule
    settled = _settled(schedule)
    assert settled["a"].outcome is Outcome.PASS
    assert settled["c"].outcome is Outcome.INTERRUPTED and settled["c"].summary == "interrupted: not started: quit"
    assert not schedule.finished  # b's process has not come back yet
    schedule.ended(b, _result(b, Outcome.INTERRUPTED))
    assert list(_settled(schedule)) == ["b"] and schedule.finished


def test_an_interrupted_prerequisite_makes_an_ended_dependent_not_counted() -> None:
    schedule = Schedule([_run("base"), _run("top", "base")], jobs=2)
    base, top = _start(schedule, "base"), _start(schedule, "top")
    schedule.ended(top, _result(top, duration_s=2.5))
    schedule.ended(base, _result(base, Outcome.INTERRUPTED))
    top_result = _settled(schedule)["top"]
    assert top_result.outcome is Outcome.INTERRUPTED and top_result.duration_s == 2.5
    assert "prerequisite base was interrupted, so this run is not counted" in top_result.summary


def test_given_results_are_not_run_again_and_gate_what_builds_on_them() -> None:
    plan = [_run("base"), _run("top", "base"), _run("other")]
    given = {"base": _result(plan[0], Outcome.FAIL)}
    schedule = Schedule(plan, jobs=3, given=given)
    assert _ids(schedule.ready()) == ["other"]
    settled = _settled(schedule)
    assert list(settled) == ["top"] and settled["top"].skip_reason == "prerequisite base failed"  # given: not heard
    assert schedule.known() == {"base": given["base"], "top": settled["top"]}


def test_a_round_added_while_it_runs_has_its_own_results_and_labels_them() -> None:
    plan = [_run("base"), _run("top", "base")]
    schedule = Schedule(plan, jobs=2)
    base = _start(schedule, "base")
    schedule.ended(base, _result(base, Outcome.FAIL))
    schedule.settle()
    rerun = PlannedRun(plan[0].invocation, (), label="with patch p")
    number = schedule.add([rerun])
    again = _start(schedule, "base", round_=number)
    schedule.ended(again, _result(again))
    assert _settled(schedule) == {"base": _result(again)}  # the round's own result, as it came
    assert [r.outcome for r in schedule.results()] == [Outcome.FAIL, Outcome.SKIPPED]  # the plan is untouched
    (shown,) = schedule.results(number)
    assert shown.summary == "with patch p: pass"
    carried = schedule.add([PlannedRun(plan[1].invocation, ("base",), label="with patch p")], given={"base": shown})
    assert _ids(schedule.ready()) == ["top"] and schedule.ready()[0].round == carried


def test_transitions_out_of_order_are_refused() -> None:
    schedule = Schedule([_run("a")], jobs=1)
    a = _start(schedule, "a")
    with pytest.raises(GpuDoctorError, match="is not waiting"):
        schedule.started(a)
    schedule.ended(a, _result(a))
    with pytest.raises(GpuDoctorError, match="is not running"):
        schedule.ended(a, _result(a))
    with pytest.raises(GpuDoctorError, match="--jobs must be at least 1"):
        Schedule([], jobs=0)


def test_a_plan_that_cannot_progress_is_stuck() -> None:
    schedule = Schedule([_run("a", "b"), _run("b", "a")], jobs=1, speculative=False)  # a cycle, as no catalog has
    assert schedule.ready() == [] and schedule.stuck() == ["a", "b"]
    with pytest.raises(GpuDoctorError, match="probe plan is stuck: a, b"):
        run_schedule(schedule)


class _Rerunner(ScheduleHandler):
    """Adds a round with one labelled rerun of each failing plan result, and, once nothing is left, one more run."""

    def __init__(self) -> None:
        self.heard: list[tuple[int, str, Outcome]] = []
        self.idle = 0

    def on_result(self, schedule: Schedule, run: ScheduledRun, result: ProbeResult) -> None:
        self.heard.append((run.round, run.run_id, result.outcome))
        if run.round == 0 and result.outcome.is_problem:
            passes = _run(result.id, script="passes.py")
            schedule.add([PlannedRun(passes.invocation, (), label="rerun")])

    def on_idle(self, schedule: Schedule) -> None:
        self.idle += 1
        if self.idle == 1:
            schedule.add([_run("last")])


def test_the_loop_runs_what_handlers_add_under_the_same_limit_and_tells_the_face() -> None:
    schedule = Schedule([_run("raises", script="raises.py"), _run("after", "raises")], jobs=1)
    handler, shown, started = _Rerunner(), [], []
    run_schedule(schedule, [handler, FaceCallbacks(lambda run: started.append(run.run_id), shown.append)])
    assert started == ["raises", "raises", "last"]  # one at a time, rounds in the order they came; "after" is skipped
    assert handler.heard == [
        (0, "raises", Outcome.FAIL), (0, "after", Outcome.SKIPPED), (1, "raises", Outcome.PASS),
        (2, "last", Outcome.PASS),
    ]  # fmt: skip
    assert [r.summary.split(":")[0] for r in shown] == ["KeyError", "skipped", "rerun", "1 + 1 == 2"]  # labelled
    assert handler.idle == 2 and schedule.finished
