"""The runner against synthetic probes that really segfault, abort, raise, exit, hang, flood and babble."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from conftest import synthetic_copy

from gpudoctor.facts.inventory import collect_environment
from gpudoctor.model import Device, Outcome, ProbeResult, ProbeSpec
from gpudoctor.suite.catalog import load_catalog
from gpudoctor.suite.plan import plan_runs
from gpudoctor.suite.runner import CAPTURE_LIMIT, ProbeInvocation, run_probe
from gpudoctor.suite.schedule import run_plan


def _run(
    synthetic_dir: Path, script: str, *, timeout: float = 60, device: Device = Device.NONE, args: tuple[str, ...] = ()
) -> ProbeResult:
    spec = ProbeSpec(id=Path(script).stem, script=script, title=script, devices=(device,), args=args)
    return run_probe(ProbeInvocation(spec, device, sys.executable, synthetic_dir, timeout))


def test_pass_carries_details_and_steps(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "passes.py", device=Device.CPU)
    assert result.outcome is Outcome.PASS
    assert result.summary == "1 + 1 == 2"
    assert result.details == {"answer": 2}
    assert result.last_step == "add numbers"  # the last step before the report, not the teardown
    assert result.exit_code == 0
    assert result.duration_s > 0
    assert result.command.endswith("passes.py --device cpu")


def test_segfault_is_a_crash_with_signal_step_and_frames(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "segfaults.py")
    assert result.outcome is Outcome.CRASH
    assert result.signal == "SIGSEGV"
    assert result.exit_code == -11
    assert result.last_step == "read address 0"
    assert "SIGSEGV during 'read address 0'" in result.summary
    functions = [f.function for f in result.frames]
    assert "string_at" in functions and "main" in functions
    assert result.frames[0].thread == "current"


def test_segfault_in_worker_thread_names_the_worker_frames(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "segfaults_in_thread.py")
    assert result.outcome is Outcome.CRASH and result.signal == "SIGSEGV"
    crashed = [f for f in result.frames if f.thread == "current"]
    assert crashed[0].function == "string_at"
    assert any(f.function == "execute_on_worker" for f in crashed)
    # the main thread, waiting on the future, is listed too
    assert any(f.function == "main" and f.thread != "current" for f in result.frames)


def test_abort_is_a_crash(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "aborts.py")
    assert result.outcome is Outcome.CRASH
    assert result.signal == "SIGABRT"
    assert "Aborted" in result.summary


def test_exception_is_a_failure_with_type_and_message(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "raises.py")
    assert result.outcome is Outcome.FAIL
    assert result.exception_type == "KeyError"
    assert result.message == "'float8_e8m0fnu'"
    assert result.frames[0].function == "main"


def test_wrong_value_is_a_failure(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "wrong_value.py", device=Device.CPU)
    assert result.outcome is Outcome.FAIL
    assert result.exception_type == "_harness.CheckFailed"
    assert result.message == "expected [1.0, 2.0], got [1.0, 2.5]"


def test_nonzero_exit_without_result_is_a_failure(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "exits_nonzero.py")
    assert result.outcome is Outcome.FAIL
    assert result.exit_code == 3
    assert "exited with status 3 without reporting a result" in result.summary
    assert result.last_step == "exit abruptly"


def test_plain_script_traceback_is_parsed(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "no_harness_traceback.py")
    assert result.outcome is Outcome.FAIL
    assert result.exception_type == "RuntimeError"
    assert result.message == "CUDA driver version is insufficient for CUDA runtime version"


def test_skip_reports_its_reason(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "skips.py")
    assert result.outcome is Outcome.SKIPPED
    assert result.skip_reason == "the thing this probe needs is absent"


def test_crash_during_teardown_after_a_pass_is_a_crash(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "crashes_at_exit.py")
    assert result.outcome is Outcome.CRASH
    assert result.signal == "SIGSEGV"
    assert "at interpreter exit, after the probe reported" in result.summary


def test_hang_is_killed_at_the_timeout_and_shows_where(synthetic_dir: Path) -> None:
    started = time.monotonic()
    result = _run(synthetic_dir, "hangs.py", timeout=1.5)
    assert result.outcome is Outcome.TIMEOUT
    assert time.monotonic() - started < 20
    assert result.last_step == "wait for the device"
    assert "wait_for_device" in [f.function for f in result.frames]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie waiting for its reaper is dead for our purposes
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def test_hanging_grandchild_is_killed_too(synthetic_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    result = _run(synthetic_dir, "hangs_in_grandchild.py", timeout=2, args=("--marker", str(marker)))
    assert result.outcome is Outcome.TIMEOUT
    grandchild = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the grandchild outlived the timeout"


def test_ten_megabytes_of_output_is_bounded_and_nothing_blocks(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "floods.py", timeout=60)
    assert result.outcome is Outcome.PASS
    for tail in (result.stdout_tail, result.stderr_tail):
        assert tail.startswith("[... ") and "earlier bytes dropped" in tail
        assert len(tail.encode()) <= CAPTURE_LIMIT + 200
    assert "END-OF-FLOOD" in result.stdout_tail


def test_invalid_utf8_is_captured_readably(synthetic_dir: Path) -> None:
    result = _run(synthetic_dir, "bad_utf8.py")
    assert result.outcome is Outcome.PASS
    assert "before \ufffd\ufffd\ufffd( after" in result.stdout_tail
    assert "surrogate" in result.stderr_tail


def test_missing_script_is_a_failure_not_an_exception(tmp_path: Path) -> None:
    spec = ProbeSpec(id="ghost", script="ghost.py", title="ghost")
    result = run_probe(ProbeInvocation(spec, Device.NONE, sys.executable, tmp_path, 30))
    assert result.outcome is Outcome.FAIL
    assert "ghost.py" in result.summary


def test_missing_interpreter_is_a_failure_not_an_exception(synthetic_dir: Path) -> None:
    spec = ProbeSpec(id="passes", script="passes.py", title="passes")
    result = run_probe(ProbeInvocation(spec, Device.NONE, "/nonexistent/python", synthetic_dir, 30))
    assert result.outcome is Outcome.FAIL
    assert result.exception_type == "FileNotFoundError"


@pytest.mark.parametrize(("jobs", "speculative"), [(1, False), (4, False), (4, True)])
def test_whole_synthetic_suite_runs_to_the_end(synthetic_dir: Path, jobs: int, speculative: bool) -> None:
    """No crash, hang or flood stops the run: every variant gets a result, prerequisites gate."""
    specs = load_catalog(synthetic_dir)
    environment = collect_environment(extra_packages=[n for s in specs for n in s.needs_packages])
    plan = plan_runs(specs, environment, python=sys.executable, probe_dir=synthetic_dir)
    streamed: list[str] = []
    results = run_plan(plan, jobs=jobs, on_result=lambda r: streamed.append(r.id), speculative=speculative)
    outcomes = {r.id: r.outcome for r in results}
    assert [r.id for r in results] == [p.run_id for p in plan]
    assert sorted(streamed) == sorted(outcomes)
    assert outcomes["passes/cpu"] is Outcome.PASS
    assert outcomes["passes/cuda"] is Outcome.SKIPPED  # this machine has no driver
    assert outcomes["segfaults"] is Outcome.CRASH
    assert outcomes["aborts"] is Outcome.CRASH
    assert outcomes["raises"] is Outcome.FAIL
    assert outcomes["hangs"] is Outcome.TIMEOUT
    assert outcomes["floods"] is Outcome.PASS
    assert outcomes["bad-utf8"] is Outcome.PASS
    assert outcomes["needs-missing-package"] is Outcome.SKIPPED
    assert outcomes["needs-present-package"] is Outcome.PASS
    after = next(r for r in results if r.id == "after-segfault")
    assert after.outcome is Outcome.SKIPPED
    assert after.skip_reason is not None
    assert after.skip_reason.startswith("prerequisite segfaults crashed")
    cuda = next(r for r in results if r.id == "passes/cuda")
    assert cuda.skip_reason is not None and cuda.skip_reason.startswith("no CUDA device")


def test_speculative_runs_start_early_and_are_stopped_when_a_prerequisite_fails(tmp_path: Path) -> None:
    """A dependent starts beside its prerequisite; when the prerequisite crashes, the dependent (here one
    that would hang for a minute) is killed and reported skipped, as if it had waited."""
    probes = synthetic_copy(
        tmp_path,
        '[[probe]]\nid = "segfaults"\nscript = "segfaults.py"\ntitle = "crashes"\nstage = 1\n\n'
        '[[probe]]\nid = "waits"\nscript = "hangs.py"\ntitle = "hangs"\nstage = 2\n'
        'after = ["segfaults"]\ntimeout_s = 60\n',
    )
    specs = load_catalog(probes)
    plan = plan_runs(specs, collect_environment(), python=sys.executable, probe_dir=probes)
    events: list[str] = []
    results = run_plan(
        plan,
        jobs=2,
        on_start=lambda run: events.append(f"start {run.run_id}"),
        on_result=lambda result: events.append(f"end {result.id}"),
    )
    assert sorted(events[:2]) == ["start segfaults", "start waits"]  # the dependent did not wait
    assert [r.outcome for r in results] == [Outcome.CRASH, Outcome.SKIPPED]
    assert results[1].skip_reason == "prerequisite segfaults crashed; this run had started ahead of it and was stopped"


def test_skip_reasons_name_each_outcome_as_the_report_shows_it(tmp_path: Path) -> None:
    """A dependent that ended before its prerequisite timed out, and one that builds on that dependent: each reason
    names the outcome the report shows for the run it names, down to the run at the root of the chain."""
    probes = synthetic_copy(
        tmp_path,
        '[[probe]]\nid = "hangs"\nscript = "hangs.py"\ntitle = "hangs"\nstage = 1\ntimeout_s = 4\n\n'
        '[[probe]]\nid = "passes"\nscript = "passes.py"\ntitle = "passes"\nstage = 2\ndevices = ["cpu"]\n'
        'details = ["answer"]\nafter = ["hangs"]\n\n'
        '[[probe]]\nid = "raises"\nscript = "raises.py"\ntitle = "raises"\nstage = 3\nafter = ["passes"]\n',
    )
    plan = plan_runs(load_catalog(probes), collect_environment(), python=sys.executable, probe_dir=probes)
    ended: list[str] = []
    results = {r.id: r for r in run_plan(plan, jobs=3, on_result=lambda r: ended.append(r.id))}
    assert [results[i].outcome for i in ("hangs", "passes/cpu", "raises")] == [Outcome.TIMEOUT, *[Outcome.SKIPPED] * 2]
    assert results["passes/cpu"].skip_reason == (
        "prerequisite hangs timed out; this run had started ahead of it, and its result is left out: it means "
        "something only once that prerequisite passes"
    )
    assert results["raises"].skip_reason.startswith(  # type: ignore[union-attr]
        "prerequisite passes/cpu was skipped, because hangs timed out; this run had started ahead of it"
    )
    assert ended[0] == "hangs"  # the dependent had ended first, but its result waited for the prerequisite's
