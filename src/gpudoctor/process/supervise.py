"""The one way gpudoctor runs a child process: ``supervise`` starts it in a session and process group of its own,
owned by a cancel scope, with a deadline, bounded capture and watchers, and returns how it ended (``Ended``).

Every child whose ending matters goes through here — probes (suite.runner), a user's command (reproducer.command),
gdb, uv, questions put to another interpreter — so each gets the same guarantees: stdin closed; the exit status and
what it cost from ``wait4``; at the deadline a hook (a probe's thread dump, a command's gdb attach) before the group
is killed; cancelling the scope kills the group at once; and when it ends, nothing of it is left running — what it
left in its group or started outside it (setsid, a double fork) is found, ended and named (process.leftovers).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpudoctor.process.cancel import Cancelled, CancelScope, kill_group
from gpudoctor.process.capture import Tail, TailReader
from gpudoctor.process.leftovers import (
    LeftProcess,
    Tracker,
    describe,
    end,
    find_left,
    marked,
    reap,
    still_running,
    subreaper,
)

CAPTURE_LIMIT = 1024 * 1024  # bytes kept from the end of each of stdout and stderr, unless the caller says
LEFT_GRACE_S = 1.0  # how long what a run left running has between SIGTERM and SIGKILL (none once cancelled)
LINGER_S = 0.5  # how long after its program ended a process may take to end by itself before it counts as left
_ROUNDS = 3  # what is left running may start more while it is being ended: look again, this many times


class Watcher(Protocol):
    """Something that looks at the running child (its /proc entries, say) from a thread of its own."""

    def watch(self, pid: int, stop: threading.Event) -> None:
        """Watch the child ``pid`` (also its process group id) until ``stop`` is set."""


@dataclass(frozen=True)
class Ended:
    """How a supervised child ended, and what it cost and printed."""

    returncode: int  # as subprocess reports it: -N for a death by signal N
    timed_out: bool  # the deadline passed: the hook ran, then the group was killed
    cancelled: str | None  # why its scope was cancelled while it ran (the group was killed), else None
    started: float  # time.monotonic() at the start, and when it had ended
    ended: float
    cpu_s: float | None
    peak_rss_mib: float | None
    stdout: Tail
    stderr: Tail
    left_running: tuple[LeftProcess, ...] = ()  # what it left running (in its group or out of it), now ended

    @property
    def duration_s(self) -> float:
        return self.ended - self.started

    def unless_cancelled(self) -> Ended:
        """This ending, or Cancelled when the scope stopped the run (for work with nothing to keep from a part)."""
        if self.cancelled is not None:
            raise Cancelled(self.cancelled)
        return self


class _Reaper(threading.Thread):
    """Waits for the child with wait4, which also gives what it cost: CPU time and peak memory. The status is handed
    to the Popen object, so nothing else waits for (or reaps) the same process."""

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


def supervise(
    argv: Sequence[str],
    scope: CancelScope,
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    capture_limit: int = CAPTURE_LIMIT,
    stdout_limit: int | None = None,
    on_deadline: Callable[[int], None] | None = None,
    deadline_grace_s: float = 0.0,
    watchers: Sequence[Watcher] = (),
) -> Ended:
    """Run ``argv`` to its end (see the module docstring). ``stdout_limit`` overrides ``capture_limit`` for stdout
    (an answer can be longer than the log kept beside it). At ``timeout_s``, ``on_deadline(pid)`` runs (still owned
    by ``scope``), the child has ``deadline_grace_s`` to end, then its group is killed. A scope cancelled before the
    start raises Cancelled; one cancelled during the run kills the group and the ending says so. OSError: it could
    not be started."""
    if scope.cancelled:
        raise Cancelled(scope.reason or "cancelled")
    token = uuid.uuid4().hex
    child_env = marked(os.environ if env is None else env, token)
    with subreaper():
        started = time.monotonic()
        process = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, env=child_env, cwd=cwd,
        )  # fmt: skip
        assert process.stdout is not None and process.stderr is not None
        readers = [TailReader(process.stdout, stdout_limit or capture_limit), TailReader(process.stderr, capture_limit)]
        reaper = _Reaper(process)
        stop = threading.Event()
        tracker = Tracker(token)
        watching = [threading.Thread(target=w.watch, args=(process.pid, stop), daemon=True)
                    for w in (*watchers, tracker)]  # fmt: skip
        for thread in [*readers, reaper, *watching]:
            thread.start()
        timed_out = False
        try:
            with scope.owning(process.pid):  # start_new_session: the pid is the group id
                if not reaper.done.wait(timeout_s):
                    timed_out = True
                    if on_deadline is not None:
                        on_deadline(process.pid)
                    if not reaper.done.wait(deadline_grace_s):
                        kill_group(process.pid)
                    reaper.done.wait()
        finally:  # also on KeyboardInterrupt: nothing it started outlives it
            stop.set()
            if not reaper.done.is_set():
                kill_group(process.pid)
                reaper.done.wait()
            left = _end_what_is_left(
                tracker, process.pid, with_it=timed_out or scope.cancelled, at_once=scope.cancelled
            )
            for thread in [*readers, *watching]:
                thread.join(timeout=5)
    return Ended(
        returncode=reaper.returncode, timed_out=timed_out, cancelled=scope.reason if scope.cancelled else None,
        started=started, ended=reaper.ended, cpu_s=reaper.cpu_s, peak_rss_mib=reaper.peak_rss_mib,
        stdout=readers[0].tail(), stderr=readers[1].tail(), left_running=left,
    )  # fmt: skip


def _end_what_is_left(tracker: Tracker, pgid: int, *, with_it: bool, at_once: bool) -> tuple[LeftProcess, ...]:
    """End and reap what the run left running, and name it. After a program ended by itself, what still runs a
    moment later is what it left (a helper that sees its pipe close and exits was not left). When its group was
    killed with it (``with_it``: a timeout, a stop), the group's members ran with it and were not left: only what
    had left the group is named. A stop (``at_once``) ends it all without the grace."""
    token = tracker.token
    found = find_left(token)
    if found and not with_it:
        found = still_running(found, LINGER_S)
    named = {p.pid: describe(p) for p in found if not (with_it and p.pgrp == pgid)}
    kill_group(pgid)  # what it left in its group goes at once, even with its environment cleared
    ended, grace = list(found), 0.0 if at_once else LEFT_GRACE_S
    for _ in range(_ROUNDS):  # what is being ended may start more: look again
        if not found:
            break
        end(found, grace)
        seen = {(p.pid, p.started) for p in ended}
        found, grace = [p for p in find_left(token) if (p.pid, p.started) not in seen], 0.0
        named.update((p.pid, describe(p)) for p in found if p.pgrp != pgid)
        ended += found
    reap(pgid, [*ended, *tracker.seen.values()])
    return tuple(named.values())
