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
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudoctor.model import Device, Frame, Outcome, ProbeResult, ProbeSpec, StepTime
from gpudoctor.process.cancel import CancelScope, kill_group, start_in_own_group
from gpudoctor.process.capture import TailReader
from gpudoctor.process.endings import fatal_error, faulthandler_frames, signal_name, traceback_tail
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

    @property
    def run_id(self) -> str:
        run_id = self.spec.run_id(self.device)
        return f"{run_id}:{self.gpu_label}" if self.gpu_label is not None else run_id

    def argv(self) -> list[str]:
        argv = [self.python, "-X", "faulthandler", str(self.probe_dir / self.spec.script)]
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
    """Start the probe, wait for it within its timeout, and classify what happened.

    The probe's process group belongs to ``cancel`` while it runs: cancelling the scope kills it at once and
    the result is INTERRUPTED (as when the user quits, or a prerequisite run in parallel has failed).
    """
    if cancel is not None and cancel.cancelled:
        return interrupted_result(invocation, cancel.reason or "cancelled before it started")
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="gpudoctor-"))
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
        started = time.monotonic()
        try:
            # Own session and process group: the timeout and a stop kill grandchildren too.
            process = start_in_own_group(
                invocation.argv(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=scratch
            )
        except OSError as error:
            return ProbeResult(
                id=invocation.run_id,
                probe=invocation.spec.id,
                device=invocation.device,
                outcome=Outcome.FAIL,
                duration_s=time.monotonic() - started,
                command=invocation.reproduce_command(),
                summary=f"could not start the probe: {error}",
                exception_type=type(error).__name__,
                message=redact_text(str(error)),
            )
        assert process.stdout is not None and process.stderr is not None
        readers = [TailReader(process.stdout, CAPTURE_LIMIT), TailReader(process.stderr, CAPTURE_LIMIT)]
        for reader in readers:
            reader.start()
        owner = cancel if cancel is not None else CancelScope()
        reaper = _Reaper(process)
        reaper.start()
        with owner.owning(process.pid):  # start_new_session: the pid is the group id
            returncode, timed_out = _wait(process, reaper, started + invocation.timeout_s)
            ended = reaper.ended
            duration = ended - started
            # Whatever the probe left behind in its group (a hung grandchild) goes too, or the pipes never close.
            kill_group(process.pid)
        for reader in readers:
            reader.join(timeout=5)
        events = read_events(result_file)
    if owner.cancelled:
        return interrupted_result(invocation, owner.reason or "cancelled", duration)
    result = classify(
        invocation,
        returncode=returncode,
        timed_out=timed_out,
        duration_s=duration,
        events=events,
        stdout=readers[0].text(),
        stderr=readers[1].text(),
    )
    return dataclasses.replace(
        result,
        steps=step_times(events, started, ended),
        cpu_s=reaper.cpu_s,
        peak_rss_mib=reaper.peak_rss_mib,
    )


class _Reaper(threading.Thread):
    """Waits for the probe process with wait4, which also gives what it cost: CPU time and peak memory.

    The exit status is handed to the Popen object, so nothing else waits for (or reaps) the same process."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.done = threading.Event()
        self.returncode = -1
        self.ended = 0.0
        self.cpu_s: float | None = None
        self.peak_rss_mib: float | None = None

    def run(self) -> None:
        try:
            _, status, usage = os.wait4(self.process.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
            self.cpu_s = usage.ru_utime + usage.ru_stime
            self.peak_rss_mib = usage.ru_maxrss / 1024  # KiB on Linux
        except ChildProcessError:  # reaped elsewhere: the status is Popen's
            self.returncode = self.process.wait()
        finally:
            self.ended = time.monotonic()
            self.process.returncode = self.returncode
            self.done.set()


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


def _wait(process: subprocess.Popen[bytes], reaper: _Reaper, deadline: float) -> tuple[int, bool]:
    """Wait for the probe until ``deadline``; on timeout dump its threads, then kill its group."""
    if reaper.done.wait(max(0.0, deadline - time.monotonic())):
        return reaper.returncode, False
    # The probe harness registers faulthandler on SIGUSR1: ask where every thread hangs first.
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGUSR1)
    if not reaper.done.wait(_DUMP_GRACE_S):
        kill_group(process.pid)
        reaper.done.wait()
    return reaper.returncode, True


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
    """Decide the outcome from exit status, the side-channel events and the captured output."""
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
    frames: tuple[Frame, ...] = tuple(
        Frame(redact_text(f.file), f.line, f.function, f.thread) for f in faulthandler_frames(stderr)
    )

    if timed_out:
        where = f" during '{last_step}'" if last_step else ""
        return ProbeResult(
            outcome=Outcome.TIMEOUT,
            summary=f"no answer after {invocation.timeout_s:g} s{where}; the process group was killed",
            frames=frames,
            **common,
        )
    if returncode < 0:
        name = signal_name(-returncode)
        headline = fatal_error(stderr)
        after_result = reported is not None and final_step == SHUTDOWN_STEP
        where = (
            "at interpreter exit, after the probe reported"
            if after_result
            else (f"during '{last_step}'" if last_step else "before the probe reported any step")
        )
        summary = f"killed by {name} {where}" + (f" ({headline})" if headline else "")
        return ProbeResult(outcome=Outcome.CRASH, signal=name, summary=redact_text(summary), frames=frames, **common)
    if reported is not None:
        status = reported.get("status")
        if status == STATUS_PASS and returncode == 0:
            return ProbeResult(outcome=Outcome.PASS, summary=redact_text(str(reported.get("summary", "ok"))), **common)
        if status == STATUS_SKIP:
            reason = redact_text(str(reported.get("skip_reason") or reported.get("summary") or "skipped"))
            return ProbeResult(outcome=Outcome.SKIPPED, summary=f"skipped: {reason}", skip_reason=reason, **common)
        if status == STATUS_FAIL:
            _, _, tb_frames = traceback_tail(str(reported.get("traceback", "")))
            return ProbeResult(
                outcome=Outcome.FAIL,
                summary=redact_text(str(reported.get("summary", "failed"))),
                exception_type=reported.get("exception_type"),
                message=redact_text(str(reported.get("message", ""))),
                frames=tuple(Frame(redact_text(f.file), f.line, f.function) for f in tb_frames),
                **common,
            )
    # No usable result: the process died on its own terms (sys.exit, os._exit, an uncaught error).
    exc_type, message, tb_frames = traceback_tail(stderr)
    if exc_type:
        summary = f"exited with status {returncode}: {exc_type}: {message or ''}".rstrip(": ")
    elif reported is not None:
        summary = f"reported '{reported.get('status')}' but exited with status {returncode}"
    else:
        summary = f"exited with status {returncode} without reporting a result"
        if last_step:
            summary += f" (last step: '{last_step}')"
        last_line = next((line for line in reversed(stderr.splitlines()) if line.strip()), None)
        if last_line:
            summary += f": {last_line.strip()[:300]}"
    return ProbeResult(
        outcome=Outcome.FAIL,
        summary=redact_text(summary),
        exception_type=exc_type,
        message=redact_text(message) if message else None,
        frames=tuple(Frame(redact_text(f.file), f.line, f.function) for f in tb_frames),
        **common,
    )
