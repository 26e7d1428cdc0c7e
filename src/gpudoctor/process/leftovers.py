"""What a supervised program leaves running when its run ends — in its group, or escaped from it (setsid, a double
fork) — found, ended (SIGTERM, a short grace, SIGKILL), reaped and named.

How a process is told to be a run's: every supervised child gets a token of its own in its environment
(RUN_TOKEN_ENV), which whatever it starts inherits, wherever it goes (another session, another parent); what carries
the token, and what descends from what carries it, is that run's. Several runs at once (``--jobs``, a sweep's
cells) never end each other's processes, and processes gpudoctor starts outside a run carry no token at all.

Why gpudoctor becomes a child subreaper while a run lasts (``prctl(PR_SET_CHILD_SUBREAPER)``, Linux 3.4+): what
escapes the group is re-parented to gpudoctor instead of init, so its pid stays gpudoctor's until gpudoctor reaps
it — the end of the run signals and reaps exactly the processes it found, without racing a reused pid — and a
process tree that leaves the run cannot leave gpudoctor's, so the search reads gpudoctor's descendants only (a few
/proc files, not every process on the machine). Where there is no such call (another system, a
seccomp-confined container) finding and ending still work through /proc; only the reaping is init's. Where there
is no /proc, nothing is found.

While a run lasts, its processes are looked at every TRACK_EVERY_S (``Tracker``), so that one which escapes and
exits by itself before the run ends is reaped at the end too. What is not caught: a process that clears its
environment and is not a descendant of one that kept it, and one that escapes and exits between two looks (its
zombie stays gpudoctor's until gpudoctor exits: it cannot be told from another thread's child that a subprocess
object will wait for).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.redact import redact_text

RUN_TOKEN_ENV = "GPUDOCTOR_RUN_TOKEN"
COMMAND_LIMIT = 200  # characters of a left process's command line kept in its description
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_SETTLE_S = 5.0  # how long ending and reaping may take once SIGKILL has been sent
_POLL_S = 0.02
TRACK_EVERY_S = 0.5


@dataclass(frozen=True)
class LeftProcess:
    """A process a run left running, as the report names it: its pid and its command line (redacted)."""

    pid: int
    command: str

    def __str__(self) -> str:
        return f"`{self.command}` (pid {self.pid})"


@dataclass(frozen=True)
class RunningProcess:
    """One process as /proc/PID/stat shows it; the pid with the start time (clock ticks after boot) is one process,
    whatever later reuses the pid."""

    pid: int
    name: str
    state: str
    ppid: int
    pgrp: int
    started: int

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")


def _stat(pid: int) -> RunningProcess | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        return RunningProcess(pid, name, fields[0], int(fields[1]), int(fields[2]), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def _processes() -> list[RunningProcess]:
    try:
        pids = [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return []
    return [stat for pid in pids if (stat := _stat(pid)) is not None]


def _carries(pid: int, token: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # another user's process, or one already gone
        return False
    prefix = f"{RUN_TOKEN_ENV}=".encode()
    value = next((entry[len(prefix) :] for entry in environ.split(b"\0") if entry.startswith(prefix)), b"")
    return token.encode() in value.split(b":")


def marked(env: Mapping[str, str], token: str) -> dict[str, str]:
    """``env`` with ``token`` added to the run tokens it carries: a run inside a run (gpudoctor under `gpudoctor
    run`) carries both, so the outer run's end finds the inner one's processes too."""
    outer = env.get(RUN_TOKEN_ENV)
    return {**env, RUN_TOKEN_ENV: f"{outer}:{token}" if outer else token}


def describe(stat: RunningProcess) -> LeftProcess:
    try:
        argv = [a.decode("utf-8", "replace") for a in Path(f"/proc/{stat.pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        argv = []
    command = shlex.join(argv[:-1] if argv and not argv[-1] else argv) or f"[{stat.name}]"
    command = redact_text(command)
    return LeftProcess(stat.pid, command if len(command) <= COMMAND_LIMIT else command[: COMMAND_LIMIT - 3] + "...")


_subreaper_lock = threading.Lock()
_subreaper_runs = 0
_is_subreaper = False  # the call succeeded: every process a run starts stays a descendant of gpudoctor


def _set_subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):  # no such call elsewhere: escaped processes are still found and ended
        return False
    try:  # the C library of this process, where prctl lives
        return bool(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0 and on)
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def subreaper() -> Iterator[None]:
    """gpudoctor is a child subreaper while at least one run lasts (see the module docstring for why); not after,
    so that what other code starts and leaves behind goes to init as usual."""
    global _subreaper_runs, _is_subreaper
    with _subreaper_lock:
        _subreaper_runs += 1
        if _subreaper_runs == 1:
            _is_subreaper = _set_subreaper(True)
    try:
        yield
    finally:
        with _subreaper_lock:
            _subreaper_runs -= 1
            if _subreaper_runs == 0:
                _is_subreaper = _set_subreaper(False)


def _children(pid: int) -> list[int] | None:
    """The children of ``pid`` (of each of its threads); None where the kernel does not list them."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                found += [int(child) for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
            except FileNotFoundError:
                return None
            except (OSError, ValueError):
                continue
    return found


def _family() -> list[RunningProcess]:
    """The processes a run's can be among: gpudoctor's descendants while it is a subreaper (nothing a run starts
    can leave them then), else every process."""
    if not _is_subreaper:
        return _processes()
    found: list[RunningProcess] = []
    stack = [os.getpid()]
    while stack:
        children = _children(stack.pop())
        if children is None:
            return _processes()
        for child in children:
            if (stat := _stat(child)) is not None:
                found.append(stat)
                stack.append(child)
    return found


def find_left(token: str) -> list[RunningProcess]:
    """Every live process of the run with ``token``: those carrying it, and their descendants whatever their
    environment."""
    everyone = [p for p in _family() if p.alive and p.pid != os.getpid()]
    found = {p.pid for p in everyone if _carries(p.pid, token)}
    children: dict[int, list[int]] = {}
    for process in everyone:
        children.setdefault(process.ppid, []).append(process.pid)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return sorted((p for p in everyone if p.pid in found), key=lambda p: p.pid)


def _send(process: RunningProcess, sig: int) -> None:
    """Signal ``process`` if it is still the same process (a pidfd pins it where the system has one)."""
    pidfd: int | None = None
    with contextlib.suppress(AttributeError, OSError):
        pidfd = os.pidfd_open(process.pid)
    try:
        now = _stat(process.pid)
        if now is None or now.started != process.started or not now.alive:
            return
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _living(processes: Iterable[RunningProcess]) -> list[RunningProcess]:
    return [p for p in processes if (now := _stat(p.pid)) is not None and now.started == p.started and now.alive]


def still_running(processes: Sequence[RunningProcess], wait_s: float) -> list[RunningProcess]:
    """Those of ``processes`` still running after up to ``wait_s`` (no wait once every one is gone)."""
    deadline = time.monotonic() + wait_s
    while (living := _living(processes)) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    return living


def end(processes: Sequence[RunningProcess], grace_s: float) -> None:
    """SIGTERM, up to ``grace_s`` for them to go, then SIGKILL (at once when ``grace_s`` is 0)."""
    living = list(processes)
    if grace_s > 0:
        for process in living:
            _send(process, signal.SIGTERM)
        living = still_running(living, grace_s)
    for process in living:
        _send(process, signal.SIGKILL)


def reap(pgid: int, ended: Sequence[RunningProcess]) -> None:
    """Wait (a few seconds at most) for the run's group and ``ended`` to be gone, reaping those that became
    gpudoctor's children. Only a zombie known to be the run's is reaped: one of ``ended`` (same pid, same start),
    or a member of the run's group other than its leader (whose status its own waiter took) — never a child another
    thread waits for."""
    me, wanted = os.getpid(), {(p.pid, p.started) for p in ended}
    deadline = time.monotonic() + _SETTLE_S
    while True:
        pending = False
        for process in _family():
            if (process.pid, process.started) not in wanted and (process.pgrp != pgid or process.pid == pgid):
                continue
            if not process.alive and process.ppid == me:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(process.pid, os.WNOHANG)
            else:
                pending = True  # still dying, or a zombie whose parent is still dying
        if not pending or time.monotonic() > deadline:
            return
        time.sleep(_POLL_S)


class Tracker:
    """Remembers every process of a run seen while it lasts (a watcher of process.supervise), so that what exited
    by itself before the end, and became gpudoctor's zombie, is known to be the run's and reaped."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.seen: dict[tuple[int, int], RunningProcess] = {}

    def watch(self, pid: int, stop: threading.Event) -> None:
        while _is_subreaper and not stop.wait(TRACK_EVERY_S):  # elsewhere init reaps them
            for process in find_left(self.token):
                self.seen.setdefault((process.pid, process.started), process)
