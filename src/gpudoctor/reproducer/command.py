"""`gpudoctor run -- CMD ARGS...`: the user's own command under a probe's isolation, its ending turned into a
ProbeResult — pass, fail, crash (the signal, the Python frames of every thread, native frames under gdb, the
libraries it had mapped) or timeout (every thread's stack, native and Python, taken before the kill).

The supervisor (process.supervise) runs it: own process group, stdin closed, the session's cancellation scope, a time
limit, bounded capture, and what it leaves running (in its group or escaped from it) ended and named; here come
faulthandler on through the environment, the libraries mapped in the group read from /proc while it runs, and the
stacks taken at the deadline. Nothing the command does raises here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpudoctor.calls.channel import environment as call_checks_environment
from gpudoctor.model import Device, Finding, NativeStacks, Outcome, ProbeResult, Severity
from gpudoctor.process.cancel import Cancelled, CancelScope
from gpudoctor.process.endings import classify_ending, signal_name
from gpudoctor.process.supervise import supervise
from gpudoctor.protocol import REPRODUCER_RUN_ID, ReproducerDetail
from gpudoctor.redact import redact_text
from gpudoctor.reproducer import native
from gpudoctor.reproducer.gpu_memory import GpuMemoryWatcher
from gpudoctor.reproducer.processes import ProcessWatcher

RUN_ID = REPRODUCER_RUN_ID
HOST_INDEXING_DETAIL = ReproducerDetail.HOST_INDEXING
LEFT_RUNNING_DETAIL = ReproducerDetail.LEFT_RUNNING
AT_DEADLINE_DETAIL = ReproducerDetail.AT_DEADLINE
GPU_MEMORY_DETAIL = ReproducerDetail.GPU_MEMORY
_OUT_OF_MEMORY = re.compile(r"out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|OutOfMemoryError", re.I)
PROCESSES_DETAIL = ReproducerDetail.PROCESSES
CAPTURE_LIMIT = 256 * 1024
DEFAULT_TIMEOUT_S = 600.0
MAPS_EVERY_S = 0.2
MAX_LIBRARIES = 600
_DUMP_GRACE_S = 1.0  # faulthandler's dump on SIGABRT, before the group is killed
_DEBUGGER_MIN_S = 0.5  # less than this left at the deadline: no debugger
DEADLINE_SHARE = 0.25
DEADLINE_MIN_S = 3.0
DEADLINE_MAX_S = 90.0
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class Reproducer:
    """What to run: the command, where, for how long, and with which interpreter for ``python``/``*.py``."""

    argv: tuple[str, ...]
    cwd: Path = field(default_factory=Path.cwd)
    timeout_s: float = DEFAULT_TIMEOUT_S
    python: str | None = None  # the interpreter that runs `python ...` and `script.py ...` (a sweep cell's)
    debugger: bool = True  # native frames with gdb where it is installed
    call_checks_file: str | None = None  # custom-op calls checked, into this file (gpudoctor.calls); None: off


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
    if reproducer.call_checks_file is not None:  # the start-up hook that checks custom-op calls
        env.update(call_checks_environment(env, Path(reproducer.call_checks_file)))
    return env


class MapsWatcher:
    """Reads /proc/<pid>/maps of every process in the group while it lives: the shared libraries mapped (as last
    seen, at most MAPS_EVERY_S before the end)."""

    def __init__(self) -> None:
        self.seen: dict[str, None] = {}

    @staticmethod
    def _members(pgid: int) -> list[int]:
        members = []
        with contextlib.suppress(OSError):
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                with contextlib.suppress(OSError, ValueError, IndexError):
                    stat = Path(f"/proc/{entry.name}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                        members.append(int(entry.name))
        return members

    def watch(self, pid: int, stop: threading.Event) -> None:
        while not stop.is_set():
            for member in [pid, *(p for p in self._members(pid) if p != pid)][:16]:
                with contextlib.suppress(OSError):
                    for line in Path(f"/proc/{member}/maps").read_text().splitlines():
                        parts = line.split(maxsplit=5)
                        path = parts[5] if len(parts) == 6 else ""
                        if ".so" in path and path.startswith("/") and len(self.seen) < MAX_LIBRARIES:
                            self.seen.setdefault(path.strip(), None)
            stop.wait(MAPS_EVERY_S)


def deadline_budget(timeout_s: float) -> float:
    """The time a hang's examination at the deadline may take, faulthandler's grace included: a quarter of the
    limit, at least DEADLINE_MIN_S and at most DEADLINE_MAX_S, so the whole run ends within 1.5 x its limit (the
    debugger alone once took a minute of a 45 s limit)."""
    return min(DEADLINE_MAX_S, max(DEADLINE_MIN_S, DEADLINE_SHARE * timeout_s))


class HangDump:
    """What happens at the deadline, once, in place (a hang is never rerun to hang again), within
    ``deadline_budget``: every process of the command read by py-spy in parallel (reproducer.processes), every
    thread's native stack of the command's own process and, where cuda-gdb is installed, the GPU's side — which
    kernels are running and where their threads are — then NVML's view of the GPUs (utilisation, the program's
    memory, every process on them), then SIGABRT, on which faulthandler (PYTHONFAULTHANDLER) prints every thread's
    Python frames before the process dies."""

    def __init__(self, reproducer: Reproducer, scope: CancelScope) -> None:
        self.reproducer, self.scope = reproducer, scope
        self.stacks: NativeStacks | None = None
        self.libraries: tuple[str, ...] = ()
        self.at_deadline: dict[str, Any] = {}
        self.processes: dict[str, Any] = {}
        self.timings: dict[str, float] = {}

    def __call__(self, pid: int) -> None:
        from gpudoctor.facts.nvml import gpu_processes, process_gpu_view
        from gpudoctor.reproducer import processes

        started = time.monotonic()
        until = started + deadline_budget(self.reproducer.timeout_s) - _DUMP_GRACE_S
        reader = processes.ProcessReader(pid, processes.find_py_spy(), until, self.scope.child())
        on_gpus = gpu_processes()  # while py-spy reads
        seen = process_gpu_view(set(reader.pids) | set(MapsWatcher._members(pid)))
        if seen is not None:
            self.at_deadline["nvml"] = seen
        reader.wait_for(pid)  # a debugger and py-spy cannot both trace one process
        self.timings["py-spy, command's process"] = time.monotonic() - started
        self._debugger(pid, until)
        if self.stacks is not None and not self.stacks.frames and (frames := reader.native_frames(pid)):
            how = f"{reader.tool} --native at the deadline, every Python thread ({self.stacks.how})"
            self.stacks = NativeStacks(reader.tool, how, frames)
        self.timings["debugger"] = time.monotonic() - started - self.timings["py-spy, command's process"]
        self.processes = reader.collect(on_gpus)
        self.processes["budget_s"] = round(until - started + _DUMP_GRACE_S, 2)
        self.timings["examination"] = time.monotonic() - started
        self.processes["timings_s"] = {name: round(seconds, 2) for name, seconds in self.timings.items()}
        # the command itself only: its children's dumps would interleave with its own on the shared stderr
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)  # a debugger ended at its limit can leave it stopped
            os.kill(pid, signal.SIGABRT)

    def _debugger(self, pid: int, until: float) -> None:
        cuda_gdb = native.find_cuda_gdb() if self.reproducer.debugger else None
        gdb = native.find_gdb() if self.reproducer.debugger else None
        left = until - time.monotonic()
        if gdb is None or left < _DEBUGGER_MIN_S:
            no_time = f"no time was left for {os.path.basename(gdb or '')} at the deadline"
            self.stacks = (NativeStacks(None, native.NO_DEBUGGER) if gdb is None else NativeStacks(
                native.gdb_version(gdb), no_time)) if self.reproducer.debugger else None  # fmt: skip
        elif cuda_gdb is not None:
            self.stacks = NativeStacks(native.gdb_version(cuda_gdb), "cuda-gdb could not attach to the process")
            with contextlib.suppress(OSError, Cancelled):
                self.stacks, gpu = native.attach_cuda_gdb(cuda_gdb, pid, self.scope.child(), left)
                self.at_deadline.update(gpu)
        else:
            self.stacks = NativeStacks(native.gdb_version(gdb), "gdb could not attach to the process")
            with contextlib.suppress(OSError, Cancelled):  # a stopped session is seen by the caller's scope
                self.stacks, self.libraries = native.attach_gdb(gdb, pid, self.scope.child(), left)


def run_command(reproducer: Reproducer, cancel: CancelScope | None = None) -> ProbeResult:
    """Run the user's command under the supervisor and classify how it ended (see the module docstring)."""
    owner = cancel if cancel is not None else CancelScope()
    argv = command_line(reproducer)
    common: dict[str, Any] = {"id": RUN_ID, "probe": RUN_ID, "device": Device.NONE,
                              "command": redact_text(shlex.join(reproducer.argv))}  # fmt: skip
    env = command_environment(reproducer)
    maps, hang, memory = MapsWatcher(), HangDump(reproducer, owner), GpuMemoryWatcher()
    family = ProcessWatcher()
    watchers = (maps, memory, family)
    try:
        ended = supervise(argv, owner, reproducer.timeout_s, env=env, cwd=reproducer.cwd, capture_limit=CAPTURE_LIMIT,
                          on_deadline=hang, deadline_grace_s=_DUMP_GRACE_S, watchers=watchers)  # fmt: skip
    except Cancelled as stopped:
        return ProbeResult(outcome=Outcome.INTERRUPTED, duration_s=0.0, summary=f"interrupted: {stopped.message}",
                           **common)  # fmt: skip
    except OSError as error:
        return ProbeResult(outcome=Outcome.FAIL, duration_s=0.0, summary=f"could not start the command: {error}",
                           exception_type=type(error).__name__, message=redact_text(str(error)), **common)  # fmt: skip
    left = {LEFT_RUNNING_DETAIL: [{"pid": p.pid, "command": p.command} for p in ended.left_running]}
    details: dict[str, Any] = left if ended.left_running else {}
    if memory.seen and _OUT_OF_MEMORY.search(ended.stderr.text()[-64 * 1024 :]):
        details[GPU_MEMORY_DETAIL] = memory.seen  # who held the GPU's memory while it ran out
    if hang.at_deadline:
        details[AT_DEADLINE_DETAIL] = hang.at_deadline
    if hang.processes:
        details[PROCESSES_DETAIL] = hang.processes
    elif ended.returncode != 0 and len(seen := family.record()) > 1:  # a worker that died is named by its pid
        details[PROCESSES_DETAIL] = {"seen": seen}
    if ended.cancelled is not None:
        return ProbeResult(outcome=Outcome.INTERRUPTED, duration_s=ended.duration_s,
                           summary=f"interrupted: {ended.cancelled}", details=details, **common)  # fmt: skip
    stdout, stderr = ended.stdout.text(), ended.stderr.text()
    result = classify(reproducer, ended.returncode, ended.timed_out, ended.duration_s, stdout, stderr)
    stacks, libraries = hang.stacks, hang.libraries
    if result.outcome is Outcome.CRASH and stacks is None and reproducer.debugger:
        stacks, gdb_libraries = _crash_stacks(reproducer, argv, env, result, owner)
        libraries = gdb_libraries or libraries
    mapped = libraries or tuple(maps.seen)
    if stacks is not None:
        frames = tuple(replace(f, where=redact_text(f.where) if f.where else None) for f in stacks.frames)
        stacks = replace(stacks, how=redact_text(stacks.how), frames=frames)
    return replace(result, native=stacks, mapped_libraries=tuple(redact_text(p) for p in mapped[:MAX_LIBRARIES]),
                   details={**result.details, **details})  # fmt: skip


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
    """The ending by the shared rules (process.endings), where a status 128 + N is a child's death by signal N."""
    common: dict[str, Any] = {
        "id": RUN_ID, "probe": RUN_ID, "device": Device.NONE, "duration_s": duration,
        "command": redact_text(shlex.join(reproducer.argv)), "exit_code": returncode,
        "stdout_tail": redact_text(stdout), "stderr_tail": redact_text(stderr),
    }  # fmt: skip
    ending = classify_ending(returncode, timed_out, stderr)
    if ending.outcome is Outcome.TIMEOUT:
        summary = f"no end after {reproducer.timeout_s:g} s: every thread's stack was taken, then its group killed"
        return ProbeResult(outcome=Outcome.TIMEOUT, summary=summary, frames=ending.dumped, **common)
    # a shell or launcher reports its child's death by signal N as status 128 + N
    by_child = returncode > 128 and returncode - 128 in {s.value for s in signal.Signals}
    if ending.outcome is Outcome.CRASH or by_child:
        name = ending.signal or signal_name(returncode - 128)
        where = next((f"in {f.function} ({f.file}:{f.line})" for f in ending.dumped if f.thread == "current"), "")
        summary = ending.killed(where, name)
        if by_child:
            summary = f"a child process was {summary} (exit status {returncode})"
        return ProbeResult(outcome=Outcome.CRASH, signal=name, summary=redact_text(summary), frames=ending.dumped,
                           **common)  # fmt: skip
    if ending.outcome is Outcome.PASS:
        return ProbeResult(outcome=Outcome.PASS, summary="exited with status 0", **common)
    return ProbeResult(
        outcome=Outcome.FAIL, summary=redact_text(ending.exited()[:2000]), exception_type=ending.exception_type,
        message=redact_text(ending.message) if ending.message else None, frames=ending.traceback, **common,
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


LEFT_RUNNING_ISSUE = "command-left-processes-running"


def left_running_finding(result: ProbeResult) -> Finding | None:
    """The notice that the command left processes running (its LEFT_RUNNING_DETAIL), naming each; None if none."""
    left = result.details.get(LEFT_RUNNING_DETAIL)
    if not isinstance(left, list) or not left:
        return None
    named = tuple(f"`{p.get('command')}` (pid {p.get('pid')})" for p in left if isinstance(p, dict))
    them = "them" if len(named) > 1 else "it"
    return Finding(
        id=LEFT_RUNNING_ISSUE,
        title=f"Your command left {len(named)} process{'es' if len(named) > 1 else ''} running; gpudoctor ended {them}",
        severity=Severity.NOTICE,
        evidence=named,
        runs=(result.id,),
        explanation="When your command ended, processes it had started were still running: left in its process "
        "group, or started outside it (setsid, a double fork, a daemon). Run by hand, they would outlive the "
        "command, holding GPU memory, files or ports and changing what the next run sees. gpudoctor ended "
        f"{them} when the run ended (SIGTERM, then SIGKILL where needed), so nothing of this run is left running.",
        fix="Have the program wait for or stop what it starts before it exits (Popen.wait or terminate in a "
        "finally, join its worker processes, a context manager); start a service it means to leave running "
        "outside the reproducer.",
    )
