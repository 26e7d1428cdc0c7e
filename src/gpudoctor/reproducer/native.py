"""Native stacks of a user's process, with gdb in batch mode: a crashing command run once more under it (the
crashing thread's frames, every thread's, the libraries mapped at the signal), or a hanging one attached before it
is killed. gdb is the well-kept tool every Linux distribution packages; without it, say so and how to get it.

Parsing is pure functions over gdb's text, tested on real gdb output; running gdb is ``crash_under_gdb`` and
``attach_gdb``, each bounded in time and owned by the caller's cancellation scope.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpudoctor.model import NativeFrame, NativeStacks
from gpudoctor.process.cancel import CancelScope
from gpudoctor.process.supervise import supervise

GDB_TIMEOUT_S = 60.0
VERSION_TIMEOUT_S = 5.0
FRAMES_PER_THREAD = 32
CRASHING_FRAMES = 64
MAX_THREADS = 64
NO_DEBUGGER = (
    "no native frames: gdb is not installed (apt install gdb, dnf install gdb, or conda install gdb); "
    "the Python frames above come from faulthandler"
)
_MARK = "@@gpudoctor"
_FATAL = ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGTRAP", "SIGSYS")
_RECEIVED = re.compile(r"(?:Program|Thread \d+ .*?) received signal (SIG[A-Z0-9]+)")
_FRAME = re.compile(
    r"^#(?P<number>\d+)\s+(?:0x[0-9a-fA-F]+ in )?(?P<function>.+?)(?: \(.*\))?(?: (?:from|at) (?P<where>\S+))?\s*$"
)
_THREAD = re.compile(r"^Thread (?P<number>\d+) \((?P<label>.*)\):\s*$")
_LWP = re.compile(r"\(LWP (?P<lwp>\d+)\)(?: \"(?P<name>[^\"]*)\")?")
_LIBRARY = re.compile(r"^(?:0x[0-9a-fA-F]+\s+0x[0-9a-fA-F]+|\s+)\s+\S+\s+(?:\(\*\)\s+)?(?P<path>/\S+)\s*$")


CUDA_GDB_PLACES = ("/usr/local/cuda/bin/cuda-gdb",)


def find_gdb() -> str | None:
    """gdb, else cuda-gdb (NVIDIA's gdb, which debugs host code too: the GPU machines have it and no gdb)."""
    return shutil.which("gdb") or find_cuda_gdb()


def find_cuda_gdb() -> str | None:
    found = shutil.which("cuda-gdb")
    return found or next((p for p in CUDA_GDB_PLACES if os.access(p, os.X_OK)), None)


@functools.cache
def gdb_version(gdb: str) -> str:
    """ "gdb 13.1" or "cuda-gdb 13.0", asked once per debugger, bounded in time and output (a debugger that hangs or
    floods costs seconds, not the run)."""
    name = "cuda-gdb" if os.path.basename(gdb).startswith("cuda-gdb") else "gdb"
    try:
        ran = supervise([gdb, "--version"], CancelScope(), VERSION_TIMEOUT_S, capture_limit=4096)
    except OSError:
        return name
    said = ran.stdout.text()
    # "NVIDIA (R) cuda-gdb 13.0" / "GNU gdb (Debian 13.1-3) 13.1": the number after the tool's own name
    match = re.search(r"cuda-gdb\D{0,20}?(\d+\.\d+(?:\.\d+)?)", said) if name == "cuda-gdb" else None
    match = match or re.search(r"^GNU gdb .*?(\d+\.\d+(?:\.\d+)?)\s*$", said, re.MULTILINE)
    return f"{name} {match[1]}" if match else name


def _section(text: str, name: str) -> str:
    start = text.find(f"{_MARK}-{name}@@")
    if start < 0:
        return ""
    start = text.find("\n", start) + 1
    end = text.find(_MARK, start)
    return text[start : end if end >= 0 else len(text)]


def parse_frames(text: str, thread: str, limit: int = FRAMES_PER_THREAD) -> list[NativeFrame]:
    frames: list[NativeFrame] = []
    for line in text.splitlines():
        match = _FRAME.match(line.strip())
        if match and len(frames) < limit:
            where = match["where"]
            frames.append(NativeFrame(thread, int(match["number"]), match["function"].strip(), where))
    return frames


def parse_threads(text: str) -> list[NativeFrame]:
    """Every thread's frames from ``thread apply all bt``, labelled "thread N (its label)"."""
    frames: list[NativeFrame] = []
    label: str | None = None
    chunk: list[str] = []
    seen = 0
    for line in [*text.splitlines(), "Thread 0 (end):"]:
        header = _THREAD.match(line.strip())
        if header:
            if label is not None and seen <= MAX_THREADS:
                frames += parse_frames("\n".join(chunk), label)
            lwp = _LWP.search(header["label"])
            named = f" {lwp['name']!r}" if lwp and lwp["name"] else ""
            label = f"thread {header['number']}{named}" + (f" (LWP {lwp['lwp']})" if lwp else "")
            chunk, seen = [], seen + 1
        elif label is not None:
            chunk.append(line)
    return frames


def parse_libraries(text: str) -> list[str]:
    """The paths ``info sharedlibrary`` lists."""
    return [m["path"] for line in text.splitlines() if (m := _LIBRARY.match(line))]


def _commands(*sections: tuple[str, str]) -> list[str]:
    argv = []
    for name, command in sections:
        argv += ["-ex", f"echo \\n{_MARK}-{name}@@\\n", "-ex", command]
    return [*argv, "-ex", f"echo \\n{_MARK}-end@@\\n"]


@dataclass(frozen=True)
class GdbCrash:
    """A run under gdb: the signal it stopped on (None: it did not crash this time), what gdb saw, its output."""

    signal: str | None
    stacks: NativeStacks
    libraries: tuple[str, ...]


def crash_under_gdb(
    gdb: str, argv: Sequence[str], env: Mapping[str, str], cwd: str, timeout_s: float, cancel: CancelScope
) -> GdbCrash:
    """Run ``argv`` once more under gdb, stop at the first fatal signal, and take its frames and libraries."""
    handle = ["-ex", "handle all nostop noprint pass", "-ex", f"handle {' '.join(_FATAL)} stop print nopass"]
    setup = ["-ex", "set pagination off", "-ex", "set confirm off", "-ex", "set print thread-events off",
             "-ex", "set startup-with-shell off", "-ex", "set width 0", *handle, "-ex", "run"]  # fmt: skip
    after = _commands(("crash", f"bt {CRASHING_FRAMES}"), ("threads", f"thread apply all bt {FRAMES_PER_THREAD}"),
                      ("libraries", "info sharedlibrary"))  # fmt: skip
    command = [gdb, "-q", "-nx", "-batch", *setup, *after, "-ex", "kill", "--args", *argv]
    version = gdb_version(gdb)
    ran = supervise(command, cancel, timeout_s, env=env, cwd=cwd).unless_cancelled()
    text = ran.stdout.text() + "\n" + ran.stderr.text()
    received = [s for s in _RECEIVED.findall(text) if s in _FATAL]
    if ran.timed_out:
        return GdbCrash(None, NativeStacks(version, f"a second run under {version} did not end within "
                                                    f"{timeout_s:g} s"), ())  # fmt: skip
    if not received:
        how = f"a second run under {version} did not crash (the crash does not reproduce every time)"
        return GdbCrash(None, NativeStacks(version, how), ())
    crashing = parse_frames(_section(text, "crash"), "crashing thread", CRASHING_FRAMES)
    others = parse_threads(_section(text, "threads"))
    how = f"a second run under {version}, which stopped on {received[0]}: the crashing thread first, then every thread"
    libraries = tuple(dict.fromkeys(parse_libraries(_section(text, "libraries"))))
    return GdbCrash(received[0], NativeStacks(version, how, tuple(crashing + others)), libraries)


def attach_gdb(
    gdb: str, pid: int, cancel: CancelScope, timeout_s: float = GDB_TIMEOUT_S
) -> tuple[NativeStacks, tuple[str, ...]]:
    """Every thread's native frames of a live (hanging) process, and its libraries; it is detached again. gdb has
    ``timeout_s`` (a hang's deadline gives it what is left of the time for its examination)."""
    after = _commands(("threads", f"thread apply all bt {FRAMES_PER_THREAD}"), ("libraries", "info sharedlibrary"))
    command = [gdb, "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set width 0", "-p", str(pid),
               *after, "-ex", "detach"]  # fmt: skip
    version = gdb_version(gdb)
    ran = supervise(command, cancel, timeout_s).unless_cancelled()
    text = ran.stdout.text() + "\n" + ran.stderr.text()
    frames = parse_threads(_section(text, "threads"))
    if not frames and ran.timed_out:
        return NativeStacks(
            version, f"{version} did not answer within {timeout_s:.1f} s (the time left at the deadline)"
        ), ()
    if not frames:
        reason = next((line for line in text.splitlines() if "ptrace" in line or "not permitted" in line), "")
        return NativeStacks(version, f"{version} could not attach to the process {reason}".strip()), ()
    how = f"{version} attached before the kill: every thread"
    return NativeStacks(version, how, tuple(frames)), tuple(dict.fromkeys(parse_libraries(_section(text, "libraries"))))


# `info cuda kernels` / `info cuda threads` rows (cuda-gdb): the kernels running on the GPU when it attached, and
# where their threads are (a count of threads at one PC, with the source line where the kernel carries line info).
_KERNEL_ROW = re.compile(r"^\*?\s*\d+\s+\S+\s+\d+\s+\d+\s+(?P<status>[A-Z][a-z]+)\s+\S+\s+(?P<grid>\(\d+,\d+,\d+\))\s+"
                         r"(?P<block>\(\d+,\d+,\d+\))\s+(?P<invocation>\S.*)$")  # fmt: skip
_THREAD_ROW = re.compile(
    r"^\*?\s*(?P<first>\(\d+,\d+,\d+\))\s+\(\d+,\d+,\d+\)\s+(?P<last>\(\d+,\d+,\d+\))\s+\(\d+,\d+,\d+\)\s+"
    r"(?P<count>\d+)\s+(?P<pc>0x[0-9a-fA-F]+)(?:\s+(?P<file>\S+)\s+(?P<line>\d+)|\s+\d+)?\s*$"
)
MAX_GPU_ROWS = 16


def _kernel_name(invocation: str) -> str:
    return re.split(r"<<<|\(", invocation, maxsplit=1)[0].strip()


def parse_cuda_kernels(text: str) -> list[dict[str, str]]:
    kernels: list[dict[str, str]] = []
    for line in text.splitlines():
        if (match := _KERNEL_ROW.match(line.strip())) and len(kernels) < MAX_GPU_ROWS:
            kernels.append({"kernel": _kernel_name(match["invocation"]), "status": match["status"],
                            "grid": match["grid"], "block": match["block"]})  # fmt: skip
    return kernels


def parse_cuda_threads(text: str) -> list[dict[str, str]]:
    threads: list[dict[str, str]] = []
    for line in text.splitlines():
        if (match := _THREAD_ROW.match(line.strip())) and len(threads) < MAX_GPU_ROWS:
            where = None if match["file"] in (None, "n/a", "??") else f"{match['file']}:{match['line']}"
            threads.append({"blocks": f"{match['first']}..{match['last']}", "count": match["count"],
                            "pc": match["pc"], "source": where or "no line info"})  # fmt: skip
    return threads


def attach_cuda_gdb(
    cuda_gdb: str, pid: int, cancel: CancelScope, timeout_s: float = GDB_TIMEOUT_S
) -> tuple[NativeStacks, dict[str, object]]:
    """A hanging process seen by cuda-gdb: every host thread's frames, and the GPU's side — the kernels running and
    where their threads are; it is detached again."""
    after = _commands(("kernels", "info cuda kernels"), ("gputhreads", "info cuda threads"),
                      ("threads", f"thread apply all bt {FRAMES_PER_THREAD}"))  # fmt: skip
    command = [cuda_gdb, "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set width 0",
               "-ex", "set cuda break_on_launch none", "-p", str(pid), *after, "-ex", "detach"]  # fmt: skip
    version = gdb_version(cuda_gdb)
    ran = supervise(command, cancel, timeout_s).unless_cancelled()
    text = ran.stdout.text() + "\n" + ran.stderr.text()
    frames = parse_threads(_section(text, "threads"))
    gpu: dict[str, object] = {"debugger": version, "kernels": parse_cuda_kernels(_section(text, "kernels")),
                              "threads": parse_cuda_threads(_section(text, "gputhreads")),
                              "said": [line.rstrip() for name in ("kernels", "gputhreads")
                                       for line in _section(text, name).splitlines() if line.strip()][:24]}  # fmt: skip
    if ran.timed_out:
        gpu["note"] = f"{version} did not answer within {timeout_s:.1f} s"
    if not frames:
        reason = next((line for line in text.splitlines() if "ptrace" in line or "not permitted" in line), "")
        return NativeStacks(version, f"{version} could not attach to the process {reason}".strip()), gpu
    return NativeStacks(version, f"{version} attached before the kill: every thread", tuple(frames)), gpu
