"""Every process of a user's command read from outside at a hang's deadline (its descendants and its process group):
pid, parent, command line, each thread's Python frames, its rank, what it holds on which GPU; in parallel, bounded.

The frames come from py-spy (``py-spy dump --pid N --json --native --locals``), not pystack: py-spy reads another
process's memory with process_vm_readv (pausing it with ptrace only for the moment of the read), needs no help from
the target (no signal handler, no faulthandler, no import) and no debug symbols, is one static binary that pip
installs, and answers in JSON. pystack needs a debug-friendly interpreter and libraries to find the same frames and
answers in text. py-spy is an optional extra (``gpudoctor[processes]``): without it, one line says so and the command's
own process is examined as before (gdb and faulthandler).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpudoctor.model import NativeFrame
from gpudoctor.process.cancel import CancelScope
from gpudoctor.process.supervise import supervise
from gpudoctor.redact import redact_text

MAX_PROCESSES = 32  # read at most this many; the rest are counted
MAX_FAMILY = 4096  # processes of the command looked at for membership at all
PARALLEL_READS = 8
MAX_THREADS = 16  # per process
MAX_FRAMES = 24  # per thread
NATIVE_NAME_LIMIT = 160
NATIVE_FRAMES = 3  # named native functions kept per thread, innermost first
PY_SPY_MISSING = (
    "py-spy is not installed, so only the command's own process was examined: pip install py-spy (or pip install "
    '"gpudoctor[processes]") to read every process it started'
)
_RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


def find_py_spy() -> str | None:
    """py-spy on PATH, else beside the interpreter running gpudoctor (a virtual environment that is not activated)."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if os.access(beside, os.X_OK) else None


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, process group, state letter) from /proc/PID/stat; None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[2]), fields[0]
    except (OSError, IndexError, ValueError):
        return None


def family(root: int) -> list[int]:
    """The command's processes: ``root``, its descendants by parent pid (breadth first) and the other members of
    its process group (``root`` is the group's leader: the supervisor starts it in a session of its own)."""
    parents: dict[int, int] = {}
    grouped: list[int] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (seen := _stat(int(entry.name))) is not None and seen[2] != "Z":
                parents[int(entry.name)] = seen[0]
                if seen[1] == root:
                    grouped.append(int(entry.name))
    children: dict[int, list[int]] = {}
    for pid, parent in sorted(parents.items()):
        children.setdefault(parent, []).append(pid)
    found, queue = [root], [root]
    while queue and len(found) < MAX_FAMILY:
        for child in children.get(queue.pop(0), ()):
            if child not in found:
                found.append(child)
                queue.append(child)
    return found + sorted(set(grouped) - set(found))[: MAX_FAMILY - len(found)]


def command_of(pid: int) -> str | None:
    """The process's command line (redacted); None when it cannot be read."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()[: 16 * 1024].rstrip(b"\0").split(b"\0")
    except OSError:
        return None
    return redact_text(" ".join(a.decode(errors="replace") for a in argv)) or None


def rank_variables(pid: int) -> dict[str, int]:
    """RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE from the process's environment (torchrun and most launchers set
    them), as numbers; the rest of its environment is never kept."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    found: dict[str, int] = {}
    for item in environ.split(b"\0"):
        name, _, value = item.partition(b"=")
        if name.decode(errors="replace") in _RANK_VARIABLES and value.strip().isdigit():
            found[name.decode().lower()] = int(value)
    return found


def _native_name(frame: dict[str, Any]) -> str | None:
    name = str(frame.get("name") or "")
    if not name or name.startswith("0x"):
        return None
    return name if len(name) <= NATIVE_NAME_LIMIT else name[: NATIVE_NAME_LIMIT - 3] + "..."


def _is_python(frame: dict[str, Any]) -> bool:
    """py-spy names the shared library of a native frame as its ``module``; a Python frame has none."""
    return frame.get("module") is None


PTRACE_HINT = (
    "its memory could not be read: it may have made itself non-dumpable (prctl PR_SET_DUMPABLE 0), or ptrace is "
    "refused here (kernel.yama.ptrace_scope, a container without CAP_SYS_PTRACE)"
)
_SPAWN_LOCALS = {("_wrap", "i"): "spawn_index", ("start_processes", "nprocs"): "spawn_processes"}


def read_threads(dump: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """py-spy's JSON as kept: each thread's name, id, Python frames (innermost first; file redacted, line,
    function) and the innermost named native functions it is in; and what torch.multiprocessing's own frames say:
    a rank's process index (``_wrap``'s local ``i``), the parent's number of processes (``start_processes``'s
    ``nprocs``). Every other local is dropped unread."""
    threads: list[dict[str, Any]] = []
    spawn: dict[str, int] = {}
    for thread in dump[:MAX_THREADS]:
        frames: list[dict[str, Any]] = []
        native: list[str] = []  # the innermost named native functions, above the first Python frame
        for frame in thread.get("frames") or ():
            if not isinstance(frame, dict):
                continue
            if not _is_python(frame):
                if not frames and len(native) < NATIVE_FRAMES and (name := _native_name(frame)):
                    native.append(name)
                continue
            filename = str(frame.get("filename") or "")
            if filename.endswith("torch/multiprocessing/spawn.py"):
                for local in frame.get("locals") or ():
                    key = _SPAWN_LOCALS.get((str(frame.get("name")), str(local.get("name"))))
                    if key is not None and str(local.get("repr")).isdigit():
                        spawn[key] = int(str(local.get("repr")))
            if len(frames) < MAX_FRAMES:
                frames.append({"file": redact_text(filename), "line": frame.get("line"),
                               "function": str(frame.get("name"))})  # fmt: skip
        threads.append({"thread": thread.get("thread_name") or f"thread {thread.get('os_thread_id')}",
                        "os_thread_id": thread.get("os_thread_id"), "frames": frames,
                        "native": " < ".join(native) or None})  # fmt: skip
    return threads, spawn


def _error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = next((line for line in lines if line.startswith("Error:")), lines[0] if lines else "no output")
    return redact_text(said.removeprefix("Error:").strip())[:300]


def py_spy_dump(
    py_spy: str, pid: int, timeout_s: float, scope: CancelScope, *, native: bool = True
) -> tuple[list[dict[str, Any]], str]:
    """py-spy's threads of one process, or why it could not read them. With native frames and locals first (the
    function a thread blocks in; mp.spawn's index); where that read fails, once more without them. ``native``
    False: the quick read only (a debugger reads the native frames next)."""
    said = ""
    for extra in (["--native", "--locals"], []) if native else ([],):
        started = time.monotonic()
        try:
            ran = supervise([py_spy, "dump", "--pid", str(pid), "--json", *extra], scope, timeout_s,
                            capture_limit=512 * 1024)  # fmt: skip
        except OSError as error:
            return [], f"py-spy could not be started: {error}"
        if ran.cancelled is not None:
            return [], f"stopped: {ran.cancelled}"
        if ran.timed_out:
            return [], f"py-spy did not answer within {timeout_s:.1f} s"
        if ran.returncode == 0:
            with contextlib.suppress(ValueError):
                dump = json.loads(ran.stdout.text())
                if isinstance(dump, list):
                    return [t for t in dump if isinstance(t, dict)], ""
        said = _error_line(ran.stderr.text() + "\n" + ran.stdout.text())
        timeout_s -= time.monotonic() - started
        if timeout_s <= 0.2 or _stat(pid) is None:
            break
    if _stat(pid) is None:
        return [], f"it exited while it was being read ({said})"
    return [], f"py-spy could not read it ({PTRACE_HINT}): {said}"


def describe(pid: int) -> dict[str, Any]:
    """What /proc says of a process: its pid, parent, command line, state and rank variables."""
    seen = _stat(pid)
    entry: dict[str, Any] = {"pid": pid, "ppid": seen[0] if seen else None, "command": command_of(pid)}
    for name, value in rank_variables(pid).items():
        entry[name] = value
    if "rank" in entry:
        entry["rank_from"] = "RANK"
    return entry


class ProcessReader:
    """The reads at one deadline: every process of the family read by py-spy in parallel (PARALLEL_READS at once),
    each bounded by what is left of the overall time; the root's read can be awaited first (a debugger attaches
    to it next, and two tracers cannot hold one process)."""

    def __init__(self, root: int, py_spy: str | None, until: float, scope: CancelScope) -> None:
        self.root, self.py_spy, self.until, self.scope = root, py_spy, until, scope
        self.started = time.monotonic()
        self.tool = py_spy_version(py_spy) if py_spy is not None else "py-spy"
        pids = family(root)
        self.total = len(pids)
        self.pids = pids[:MAX_PROCESSES]
        self.entries = {pid: describe(pid) for pid in self.pids}
        self.reads: dict[int, Future[tuple[list[dict[str, Any]], str]]] = {}
        self.pool: ThreadPoolExecutor | None = None
        if py_spy is not None:
            self.pool = ThreadPoolExecutor(max_workers=PARALLEL_READS, thread_name_prefix="gpudoctor-py-spy")
            for pid in self.pids:
                self.reads[pid] = self.pool.submit(self._read, pid)

    def _read(self, pid: int) -> tuple[list[dict[str, Any]], str]:
        left = self.until - time.monotonic()
        if left <= 0.2 or self.py_spy is None:
            return [], "the time for the examination ran out before its turn"
        return py_spy_dump(self.py_spy, pid, left, self.scope)

    def wait_for(self, pid: int) -> None:
        """Until ``pid``'s read has ended (or the time is up)."""
        if (read := self.reads.get(pid)) is not None:
            with contextlib.suppress(Exception):
                read.result(timeout=max(0.0, self.until - time.monotonic()))

    def native_frames(self, pid: int) -> tuple[NativeFrame, ...]:
        """Every Python thread's native frames as py-spy read them (for when no debugger could read them in time),
        labelled like gdb's threads."""
        read = self.reads.get(pid)
        if read is None or not read.done() or read.exception() is not None:
            return ()
        frames: list[NativeFrame] = []
        for thread in read.result()[0][:MAX_THREADS]:
            label = f"thread {thread.get('thread_name') or ''} (LWP {thread.get('os_thread_id')})".replace("  ", " ")
            native = [f for f in thread.get("frames") or () if isinstance(f, dict) and not _is_python(f)]
            frames += [NativeFrame(label, number, _native_name(f) or str(f.get("name")), f.get("module"))
                       for number, f in enumerate(native[:MAX_FRAMES])]  # fmt: skip
        return tuple(frames)

    def collect(self, gpus: Iterable[dict[str, Any]] | None) -> dict[str, Any]:
        """Every read, as the detail keeps it (see ReproducerDetail.PROCESSES)."""
        processes = []
        for pid in self.pids:
            entry = dict(self.entries[pid])
            read = self.reads.get(pid)
            if read is not None:
                try:
                    dump, why = read.result(timeout=max(0.0, self.until - time.monotonic()))
                except Exception:  # the time is up: its own limit ends the read that is still running
                    dump, why = [], "not read within the time for the examination"
                entry["threads"], spawn = read_threads(dump)
                if why:
                    entry["not_read"] = why
                if "spawn_index" in spawn and "rank" not in entry:
                    entry["rank"], entry["rank_from"] = spawn["spawn_index"], "mp.spawn process index"
                if "spawn_processes" in spawn:
                    entry["spawn_processes"] = spawn["spawn_processes"]
            held = [{"gpu": g.get("gpu"), "memory_mib": g.get("used_memory_mib")} for g in gpus or ()
                    if g.get("pid") == pid]  # fmt: skip
            if held:
                entry["gpus"] = held
            processes.append(entry)
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        seen: dict[str, Any] = {"processes": processes, "total": self.total,
                                "not_read": max(0, self.total - len(self.pids)),
                                "seconds": round(time.monotonic() - self.started, 2)}  # fmt: skip
        if self.py_spy is None:
            seen["note"] = PY_SPY_MISSING
        else:
            seen["tool"] = self.tool
        return seen


@functools.cache
def py_spy_version(py_spy: str) -> str:
    """ "py-spy 0.4.2", asked once per binary."""
    try:
        ran = supervise([py_spy, "--version"], CancelScope(), 5.0, capture_limit=1024)
    except OSError:
        return "py-spy"
    return ran.stdout.text().strip() or "py-spy"


WATCH_EVERY_S = 0.25
MAX_SEEN = 256


class ProcessWatcher:
    """The command's processes as seen while it runs (a supervise watcher): each one's pid, parent, command line,
    rank variables and start time, in the order they appeared, at most MAX_SEEN; so that a worker that died can be
    named by its pid after the run (mp.spawn's "process 1 terminated with signal SIGSEGV" says only its index)."""

    def __init__(self) -> None:
        self.seen: dict[int, dict[str, Any]] = {}

    def watch(self, pid: int, stop: threading.Event) -> None:
        while not stop.is_set():
            for member in family(pid)[:MAX_SEEN]:
                if member not in self.seen and len(self.seen) < MAX_SEEN:
                    entry = describe(member)
                    if entry["command"] is not None:
                        entry["started"] = _start_time(member)
                        self.seen[member] = entry
            stop.wait(WATCH_EVERY_S)

    def record(self) -> list[dict[str, Any]]:
        """Every process seen, by start time."""
        return sorted(self.seen.values(), key=lambda p: (p.get("started") or 0, p["pid"]))


def _start_time(pid: int) -> int | None:
    """When the process started, in clock ticks after boot (/proc/PID/stat field 22)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None
