"""Run one probe script in a fresh interpreter and turn whatever happens into a ProbeResult.

Own process group, stdin closed, a timeout that kills the whole group, bounded capture of stdout and
stderr, and the structured result read from a side-channel file. Nothing a probe does raises here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudoctor.model import Device, Outcome, ProbeResult, ProbeSpec, StepTime
from gpudoctor.process.cancel import Cancelled, CancelScope
from gpudoctor.process.endings import classify_ending, redacted, traceback_tail
from gpudoctor.process.scratch import scratch_folder
from gpudoctor.process.supervise import supervise
from gpudoctor.protocol import (
    EVENT_RESULT,
    EVENT_STEP,
    RESULT_FILE_ENV,
    SHUTDOWN_STEP,
    STATUS_FAIL,
    STATUS_PASS,
    STATUS_SKIP,
    decode,
)
from gpudoctor.redact import redact_text, redact_tree
from gpudoctor.suite.caches import probe_environment, reserved_temp_dir
from gpudoctor.textfile import read_prefix

CAPTURE_LIMIT = 64 * 1024  # bytes kept from the end of each of stdout and stderr
RESULT_FILE_LIMIT = 16 * 1024 * 1024
STARTUP_STEP = "interpreter start"  # from spawning the process to the probe's first step
_DUMP_GRACE_S = 1.0


@dataclass(frozen=True)
class ProbeInvocation:
    """How to start one probe variant: which interpreter, script, device and environment."""

    spec: ProbeSpec
    device: Device
    python: str
    probe_dir: Path
    timeout_s: float
    extra_env: Mapping[str, str] = field(default_factory=dict)
    gpu_label: str | None = None  # set when one probe runs once per GPU: "kernel/cuda:1"
    # Which reserved temporary folder (and so which warm MAX cache) the run may reuse: runs of the same probe
    # with the same MAX share one, whichever interpreter (a sweep's cells); by default, the interpreter.
    cache_key: str | None = None
    # An instrument the probe runs under (`gpudoctor kernel --sanitize`): its command line before the probe's, and
    # its name after the run id ("kernel/cuda+memcheck").
    wrapper: tuple[str, ...] = ()
    variant: str | None = None

    @property
    def run_id(self) -> str:
        run_id = self.spec.run_id(self.device)
        run_id = f"{run_id}:{self.gpu_label}" if self.gpu_label is not None else run_id
        return f"{run_id}+{self.variant}" if self.variant else run_id

    def argv(self) -> list[str]:
        argv = [*self.wrapper, self.python, "-X", "faulthandler", str(self.probe_dir / self.spec.script)]
        if self.device is not Device.NONE:
            argv += ["--device", self.device.value]
        return argv + list(self.spec.args)

    def reproduce_command(self) -> str:
        """The command a user types to run this probe by hand (private paths redacted)."""
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.extra_env.items()))
        command = shlex.join(self.argv())
        return redact_text(f"{prefix} {command}" if prefix else command)


def read_events(path: Path) -> list[dict[str, Any]]:
    """The probe's side-channel events (at most the first RESULT_FILE_LIMIT bytes: a probe cannot flood us)."""
    data = read_prefix(path, RESULT_FILE_LIMIT)
    return decode(data.decode("utf-8", errors="replace")) if data else []


def skipped_result(invocation: ProbeInvocation, reason: str) -> ProbeResult:
    return ProbeResult(
        id=invocation.run_id,
        probe=invocation.spec.id,
        device=invocation.device,
        outcome=Outcome.SKIPPED,
        duration_s=0.0,
        command=invocation.reproduce_command(),
        summary=f"skipped: {reason}",
        skip_reason=reason,
    )


def interrupted_result(invocation: ProbeInvocation, reason: str, duration_s: float = 0.0) -> ProbeResult:
    """A run the session stopped (or never started because it was stopped)."""
    return ProbeResult(
        id=invocation.run_id,
        probe=invocation.spec.id,
        device=invocation.device,
        outcome=Outcome.INTERRUPTED,
        duration_s=duration_s,
        command=invocation.reproduce_command(),
        summary=f"interrupted: {reason}",
    )


def run_probe(invocation: ProbeInvocation, cancel: CancelScope | None = None) -> ProbeResult:
    """Start the probe under the supervisor (process.supervise), and classify how it ended.

    The probe's process group belongs to ``cancel`` while it runs: cancelling the scope kills it at once and
    the result is INTERRUPTED (as when the user quits, or a prerequisite run in parallel has failed).
    """
    owner = cancel if cancel is not None else CancelScope()
    if owner.cancelled:
        return interrupted_result(invocation, owner.reason or "cancelled before it started")
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(scratch_folder())
        result_file = Path(scratch) / "result.jsonl"
        # Warm compile caches across runs (each content-keyed by its owner), except where a variable is set.
        env = probe_environment({**os.environ, **invocation.extra_env})
        env[RESULT_FILE_ENV] = str(result_file)
        # A temporary folder of its own: MAX builds a source package to a path in the temp folder named by
        # the source path alone, so two probes compiling the same package at once would overwrite the file
        # the other has mapped (SIGBUS); a crash must come from the stack, never from a neighbouring probe.
        # Kept between runs of the same run id (locked while in use), so MAX's compile cache stays warm.
        private_tmp = Path(scratch) / "tmp"
        private_tmp.mkdir()
        key = invocation.cache_key or invocation.python
        env["TMPDIR"] = str(stack.enter_context(reserved_temp_dir(invocation.run_id, key, private_tmp)))
        env["PYTHONFAULTHANDLER"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        try:
            ended = supervise(
                invocation.argv(), owner, invocation.timeout_s, env=env, cwd=scratch, capture_limit=CAPTURE_LIMIT,
                on_deadline=_dump_threads, deadline_grace_s=_DUMP_GRACE_S,
            )  # fmt: skip
        except Cancelled as stopped:  # cancelled between the check above and the start
            return interrupted_result(invocation, stopped.message)
        except OSError as error:
            return ProbeResult(
                id=invocation.run_id, probe=invocation.spec.id, device=invocation.device, outcome=Outcome.FAIL,
                duration_s=0.0, command=invocation.reproduce_command(),
                summary=f"could not start the probe: {error}", exception_type=type(error).__name__,
                message=redact_text(str(error)),
            )  # fmt: skip
        events = read_events(result_file)
    if ended.cancelled is not None:
        return interrupted_result(invocation, ended.cancelled, ended.duration_s)
    result = classify(
        invocation,
        returncode=ended.returncode,
        timed_out=ended.timed_out,
        duration_s=ended.duration_s,
        events=events,
        stdout=ended.stdout.text(),
        stderr=ended.stderr.text(),
    )
    return dataclasses.replace(
        result, steps=step_times(events, ended.started, ended.ended), cpu_s=ended.cpu_s, peak_rss_mib=ended.peak_rss_mib
    )


def _dump_threads(pid: int) -> None:
    """The probe harness registers faulthandler on SIGUSR1: at the deadline, ask where every thread hangs."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGUSR1)


def step_times(events: list[dict[str, Any]], started: float, ended: float) -> tuple[StepTime, ...]:
    """Each step's start and duration from the stamped events: the interpreter's start until the first step,
    each step until the next one (or the result), the shutdown step until the process ended. Stamps outside
    the process's life (another clock, a forged line) are ignored."""
    marks: list[tuple[str | None, float]] = []  # None: the result, which ends the step before it
    for event in events:
        stamp = event.get("t")
        if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not started <= stamp <= ended:
            continue
        if event.get("event") == EVENT_STEP:
            marks.append((redact_text(str(event.get("name"))), float(stamp)))
        elif event.get("event") == EVENT_RESULT:
            marks.append((None, float(stamp)))
    if not marks:
        return ()
    times = [StepTime(STARTUP_STEP, 0.0, marks[0][1] - started)]
    for index, (name, stamp) in enumerate(marks):
        if name is not None:
            until = marks[index + 1][1] if index + 1 < len(marks) else ended
            times.append(StepTime(name, stamp - started, max(0.0, until - stamp)))
    return tuple(times)


def classify(
    invocation: ProbeInvocation,
    *,
    returncode: int,
    timed_out: bool,
    duration_s: float,
    events: list[dict[str, Any]],
    stdout: str,
    stderr: str,
) -> ProbeResult:
    """Decide the outcome: the ending by the shared rules (process.endings), read with the side-channel events."""
    reported_at = next((i for i in range(len(events) - 1, -1, -1) if events[i].get("event") == EVENT_RESULT), None)
    reported = events[reported_at] if reported_at is not None else None
    steps = [str(e.get("name")) for e in events if e.get("event") == EVENT_STEP]
    final_step = steps[-1] if steps else None  # SHUTDOWN_STEP once the probe has reported
    # The step a reported failure happened in is the last one before the report.
    before_report = [str(e.get("name")) for e in events[:reported_at] if e.get("event") == EVENT_STEP]
    last_step = (before_report[-1] if before_report else None) if reported is not None else final_step
    details = reported.get("details", {}) if reported else {}
    common: dict[str, Any] = {
        "id": invocation.run_id,
        "probe": invocation.spec.id,
        "device": invocation.device,
        "duration_s": duration_s,
        "command": invocation.reproduce_command(),
        "exit_code": returncode,
        "last_step": redact_text(last_step) if last_step else None,
        "details": redact_tree(details if isinstance(details, dict) else {}),
        "stdout_tail": redact_text(stdout),
        "stderr_tail": redact_text(stderr),
    }
    ending = classify_ending(returncode, timed_out, stderr)
    during = f"during '{last_step}'" if last_step else ""
    if ending.outcome is Outcome.TIMEOUT:
        where = f" {during}" if during else ""
        summary = f"no answer after {invocation.timeout_s:g} s{where}; the process group was killed"
        return ProbeResult(outcome=Outcome.TIMEOUT, summary=summary, frames=ending.dumped, **common)
    if ending.outcome is Outcome.CRASH:
        if reported is not None and final_step == SHUTDOWN_STEP:
            during = "at interpreter exit, after the probe reported"
        summary = ending.killed(during or "before the probe reported any step")
        return ProbeResult(outcome=Outcome.CRASH, signal=ending.signal, summary=redact_text(summary),
                           frames=ending.dumped, **common)  # fmt: skip
    if reported is not None and (result := _reported_result(reported, returncode, common)) is not None:
        return result
    # No usable result: the process died on its own terms (sys.exit, os._exit, an uncaught error).
    if reported is not None and not ending.exception_type:
        summary = f"reported '{reported.get('status')}' but exited with status {returncode}"
    else:
        summary = ending.exited(" without reporting a result" + (f" (last step: '{last_step}')" if last_step else ""))
    return ProbeResult(
        outcome=Outcome.FAIL,
        summary=redact_text(summary),
        exception_type=ending.exception_type,
        message=redact_text(ending.message) if ending.message else None,
        frames=ending.traceback,
        **common,
    )


def _reported_result(reported: dict[str, Any], returncode: int, common: dict[str, Any]) -> ProbeResult | None:
    """The outcome the probe reported through the side channel, where its exit agrees with it; else None."""
    status = reported.get("status")
    if status == STATUS_PASS and returncode == 0:
        return ProbeResult(outcome=Outcome.PASS, summary=redact_text(str(reported.get("summary", "ok"))), **common)
    if status == STATUS_SKIP:
        reason = redact_text(str(reported.get("skip_reason") or reported.get("summary") or "skipped"))
        return ProbeResult(outcome=Outcome.SKIPPED, summary=f"skipped: {reason}", skip_reason=reason, **common)
    if status == STATUS_FAIL:
        _, _, frames = traceback_tail(str(reported.get("traceback", "")))
        return ProbeResult(
            outcome=Outcome.FAIL,
            summary=redact_text(str(reported.get("summary", "failed"))),
            exception_type=reported.get("exception_type"),
            message=redact_text(str(reported.get("message", ""))),
            frames=redacted(frames),
            **common,
        )
    return None
