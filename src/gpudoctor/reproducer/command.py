"""`gpudoctor run -- CMD ARGS...`: the user's own command under a probe's isolation, its ending turned into a
ProbeResult — pass, fail, crash (the signal, the Python frames of every thread, native frames under gdb, the
libraries it had mapped) or timeout (every thread's stack, native and Python, taken before the kill).

Own process group (its children go with it), stdin closed, the session's cancellation scope, a time limit, bounded
capture, faulthandler on through the environment, and the libraries mapped in the group read from /proc while it
runs. Nothing the command does raises here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpudoctor.model import Device, Frame, NativeStacks, Outcome, ProbeResult
from gpudoctor.process.cancel import Cancelled, CancelScope, kill_group, start_in_own_group
from gpudoctor.process.capture import TailReader
from gpudoctor.process.endings import fatal_error, faulthandler_frames, signal_name, traceback_tail
from gpudoctor.redact import redact_text
from gpudoctor.reproducer import native

RUN_ID = "reproducer"
HOST_INDEXING_DETAIL = "mojo_host_indexing"  # lines of Mojo packages beside the script that index from host code
CAPTURE_LIMIT = 256 * 1024
DEFAULT_TIMEOUT_S = 600.0
MAPS_EVERY_S = 0.2
MAX_LIBRARIES = 600
_DUMP_GRACE_S = 2.0
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class Reproducer:
    """What to run: the command, where, for how long, and with which interpreter for ``python``/``*.py``."""

    argv: tuple[str, ...]
    cwd: Path = field(default_factory=Path.cwd)
    timeout_s: float = DEFAULT_TIMEOUT_S
    python: str | None = None  # the interpreter that runs `python ...` and `script.py ...` (a sweep cell's)
    debugger: bool = True  # native frames with gdb where it is installed


def command_line(reproducer: Reproducer) -> list[str]:
    """The argv to start: ``python``/``python3.X`` becomes the chosen interpreter, a ``.py`` file is run by it."""
    argv = list(reproducer.argv)
    if reproducer.python is None or not argv:
        return argv
    if _PYTHON.match(os.path.basename(argv[0])):
        return [reproducer.python, *argv[1:]]
    if argv[0].endswith(".py"):
        return [reproducer.python, *argv]
    return argv


def command_environment(reproducer: Reproducer, base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PYTHONFAULTHANDLER"] = "1"  # every thread's Python frames on a fatal signal (and on the hang dump)
    env["PYTHONUNBUFFERED"] = "1"
    if reproducer.python is not None:  # `python` inside a shell script is the cell's too
        folder = os.path.dirname(reproducer.python)
        env["PATH"] = os.pathsep.join(p for p in (folder, env.get("PATH")) if p)
    return env


class _MapsWatcher(threading.Thread):
    """Reads /proc/<pid>/maps of every process in the group while it lives: the shared libraries mapped (as last
    seen, at most MAPS_EVERY_S before the end)."""

    def __init__(self, pgid: int) -> None:
        super().__init__(daemon=True)
        self.pgid = pgid
        self.seen: dict[str, None] = {}
        self.stop = threading.Event()

    def _members(self) -> list[int]:
        members = []
        with contextlib.suppress(OSError):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = Path(f"/proc/{entry.name}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[2]) == self.pgid:
                        members.append(int(entry.name))
        return members

    def run(self) -> None:
        while not self.stop.is_set():
            for pid in [self.pgid, *(p for p in self._members() if p != self.pgid)][:16]:
                with contextlib.suppress(OSError):
                    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                        parts = line.split(maxsplit=5)
                        path = parts[5] if len(parts) == 6 else ""
                        if ".so" in path and path.startswith("/") and len(self.seen) < MAX_LIBRARIES:
                            self.seen.setdefault(path.strip(), None)
            self.stop.wait(MAPS_EVERY_S)


def _hang_stacks(pid: int, reproducer: Reproducer, cancel: CancelScope) -> tuple[NativeStacks | None, tuple[str, ...]]:
    gdb = native.find_gdb() if reproducer.debugger else None
    if gdb is None:
        return (NativeStacks(None, native.NO_DEBUGGER) if reproducer.debugger else None), ()
    with contextlib.suppress(OSError, Cancelled):  # a stopped session is seen by the caller's scope
        return native.attach_gdb(gdb, pid, cancel.child())
    return NativeStacks(native.gdb_version(gdb), "gdb could not attach to the process"), ()


def run_command(reproducer: Reproducer, cancel: CancelScope | None = None) -> ProbeResult:
    """Run the user's command and classify how it ended (see the module docstring)."""
    owner = cancel if cancel is not None else CancelScope()
    argv = command_line(reproducer)
    shown = redact_text(shlex.join(reproducer.argv))
    common: dict[str, Any] = {"id": RUN_ID, "probe": RUN_ID, "device": Device.NONE, "command": shown}
    env = command_environment(reproducer)
    started = time.monotonic()
    try:
        process = start_in_own_group(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(reproducer.cwd)
        )
    except OSError as error:
        return ProbeResult(outcome=Outcome.FAIL, duration_s=0.0, summary=f"could not start the command: {error}",
                           exception_type=type(error).__name__, message=redact_text(str(error)), **common)  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    readers = [TailReader(process.stdout, CAPTURE_LIMIT), TailReader(process.stderr, CAPTURE_LIMIT)]
    for reader in readers:
        reader.start()
    watcher = _MapsWatcher(process.pid)
    watcher.start()
    stacks: NativeStacks | None = None
    libraries: tuple[str, ...] = ()
    timed_out = False
    with owner.owning(process.pid):
        try:
            returncode = process.wait(timeout=reproducer.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            stacks, libraries = _hang_stacks(process.pid, reproducer, owner)
            # faulthandler (PYTHONFAULTHANDLER) prints every thread's Python frames on SIGABRT, then it dies; the
            # command itself only: its children's dumps would interleave with its own on the shared stderr
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process.pid, signal.SIGABRT)
            try:
                returncode = process.wait(timeout=_DUMP_GRACE_S)
            except subprocess.TimeoutExpired:
                kill_group(process.pid)
                returncode = process.wait()
        finally:
            duration = time.monotonic() - started
            watcher.stop.set()
            kill_group(process.pid)  # what it left running in its group goes too
    for reader in readers:
        reader.join(timeout=5)
    watcher.join(timeout=5)
    if owner.cancelled:
        return ProbeResult(outcome=Outcome.INTERRUPTED, duration_s=duration,
                           summary=f"interrupted: {owner.reason or 'stopped'}", **common)  # fmt: skip
    stdout, stderr = readers[0].text(), readers[1].text()
    result = classify(reproducer, returncode, timed_out, duration, stdout, stderr)
    if result.outcome is Outcome.CRASH and stacks is None and reproducer.debugger:
        stacks, gdb_libraries = _crash_stacks(reproducer, argv, env, result, owner)
        libraries = gdb_libraries or libraries
    mapped = libraries or tuple(watcher.seen)
    if stacks is not None:
        frames = tuple(replace(f, where=redact_text(f.where) if f.where else None) for f in stacks.frames)
        stacks = replace(stacks, how=redact_text(stacks.how), frames=frames)
    return replace(result, native=stacks, mapped_libraries=tuple(redact_text(p) for p in mapped[:MAX_LIBRARIES]))


def _crash_stacks(
    reproducer: Reproducer, argv: list[str], env: Mapping[str, str], result: ProbeResult, owner: CancelScope
) -> tuple[NativeStacks, tuple[str, ...]]:
    gdb = native.find_gdb()
    if gdb is None:
        return NativeStacks(None, native.NO_DEBUGGER), ()
    if result.signal is None or not result.signal.startswith("SIG"):
        return NativeStacks(native.gdb_version(gdb), "the crash was a child's: run that command itself"), ()
    limit = max(native.GDB_TIMEOUT_S, min(reproducer.timeout_s, result.duration_s * 4 + 60))
    crash = native.crash_under_gdb(gdb, argv, env, str(reproducer.cwd), limit, owner.child())
    if crash.signal is not None and crash.signal != result.signal:
        how = f"{crash.stacks.how}; the first run died of {result.signal}, this one stopped on {crash.signal}"
        return replace(crash.stacks, how=how), crash.libraries
    return crash.stacks, crash.libraries


def classify(
    reproducer: Reproducer, returncode: int, timed_out: bool, duration: float, stdout: str, stderr: str
) -> ProbeResult:
    common: dict[str, Any] = {
        "id": RUN_ID, "probe": RUN_ID, "device": Device.NONE, "duration_s": duration,
        "command": redact_text(shlex.join(reproducer.argv)), "exit_code": returncode,
        "stdout_tail": redact_text(stdout), "stderr_tail": redact_text(stderr),
    }  # fmt: skip
    dumped = tuple(Frame(redact_text(f.file), f.line, f.function, f.thread) for f in faulthandler_frames(stderr))
    if timed_out:
        summary = f"no end after {reproducer.timeout_s:g} s: every thread's stack was taken, then its group killed"
        return ProbeResult(outcome=Outcome.TIMEOUT, summary=summary, frames=dumped, **common)
    # a shell or launcher reports its child's death by signal N as status 128 + N
    by_child = returncode > 128 and returncode - 128 in {s.value for s in signal.Signals}
    if returncode < 0 or by_child:
        name = signal_name(-returncode if returncode < 0 else returncode - 128)
        headline = fatal_error(stderr)
        where = next((f"in {f.function} ({f.file}:{f.line})" for f in dumped if f.thread == "current"), "")
        summary = " ".join(p for p in (f"killed by {name}", where, f"({headline})" if headline else "") if p)
        if by_child:
            summary = f"a child process was {summary} (exit status {returncode})"
        return ProbeResult(outcome=Outcome.CRASH, signal=name, summary=redact_text(summary), frames=dumped,
                           **common)  # fmt: skip
    if returncode == 0:
        return ProbeResult(outcome=Outcome.PASS, summary="exited with status 0", **common)
    exc_type, message, frames = traceback_tail(stderr)
    if exc_type:
        summary = f"exited with status {returncode}: {exc_type}: {message or ''}".rstrip(": ")
    else:
        last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
        summary = f"exited with status {returncode}" + (f": {last[:300]}" if last else "")
    return ProbeResult(
        outcome=Outcome.FAIL, summary=redact_text(summary[:2000]), exception_type=exc_type,
        message=redact_text(message) if message else None,
        frames=tuple(Frame(redact_text(f.file), f.line, f.function) for f in frames),
        **common,
    )  # fmt: skip


FINGERPRINT_FILE_LIMIT = 16 * 1024 * 1024
FINGERPRINT_FILES = 500


def _digest(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        if path.is_file() and path.stat().st_size <= FINGERPRINT_FILE_LIMIT:
            return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return None


def fingerprint(reproducer: Reproducer) -> dict[str, object]:
    """What decides a reproducer's result besides the environment: the command, where it runs, its limit, and the
    content of the files its arguments name and of the files beside a script (its kernels, its data), so that a kept
    cell result is reused only while they are unchanged."""
    digests: dict[str, str] = {}
    for arg in reproducer.argv:
        path = reproducer.cwd / arg
        if (digest := _digest(path)) is not None:
            digests[arg] = digest
        if arg.endswith(".py") and path.is_file():
            beside = sorted(
                p for p in path.parent.rglob("*")
                if p.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in p.parts)
            )[:FINGERPRINT_FILES]  # fmt: skip
            for file in beside:
                if (digest := _digest(file)) is not None:
                    digests.setdefault(str(file.relative_to(path.parent)), digest)
    return {"argv": list(reproducer.argv), "cwd": str(reproducer.cwd), "timeout_s": reproducer.timeout_s,
            "files": digests}  # fmt: skip


def fingerprint_key(reproducer: Reproducer) -> str:
    """A short name for the fingerprint: what a sweep keeps this reproducer's cell results under."""
    return hashlib.sha256(json.dumps(fingerprint(reproducer), sort_keys=True).encode()).hexdigest()[:12]
