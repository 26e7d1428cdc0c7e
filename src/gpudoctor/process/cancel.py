"""One way to stop work that runs child processes: a cancel scope that owns their process groups.

A session has one root scope; every probe run gets a child of it. Cancelling a scope kills the process
group of every run under it at once, from whichever thread (or signal handler) cancels, so the TUI's quit,
the CLI's SIGINT/SIGTERM and a failed prerequisite all stop probes the same way and without polling.
The children themselves are started by process.supervise, which also ends what left their groups when a run ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

from gpudoctor.errors import GpuDoctorError


class Cancelled(GpuDoctorError):
    """Work its cancel scope stopped before it had anything to keep (where there is a partial result, work
    returns it instead of raising)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, exit_code=128 + signal.SIGINT)  # session.ExitCode.INTERRUPTED


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a whole process group; a group that is already gone is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class CancelScope:
    """A stop flag with the process groups it kills when set, and child scopes it cancels with it.

    Cancelling is idempotent and safe from a signal handler (the lock is re-entrant, and nothing in it
    waits): the first reason given is kept.
    """

    def __init__(self, parent: CancelScope | None = None) -> None:
        self._lock = threading.RLock()
        self._event = threading.Event()
        self._groups: set[int] = set()
        self._children: list[CancelScope] = []
        self.reason: str | None = None
        if parent is not None:
            parent._adopt(self)

    def _adopt(self, child: CancelScope) -> None:
        with self._lock:
            self._children = [c for c in self._children if not c._finished()]
            self._children.append(child)
            cancelled, reason = self.cancelled, self.reason
        if cancelled:
            child.cancel(reason or "cancelled")

    def _finished(self) -> bool:
        return self.cancelled and not self._groups

    def child(self) -> CancelScope:
        """A scope cancelled with this one (and cancellable on its own)."""
        return CancelScope(self)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        """Set the flag, kill every owned process group, cancel every child scope."""
        with self._lock:
            if not self._event.is_set():
                self.reason = reason
                self._event.set()
            groups = list(self._groups)
            children = list(self._children)
        for pgid in groups:
            kill_group(pgid)
        for child in children:
            child.cancel(reason)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled (True) or until ``timeout`` passes (False)."""
        return self._event.wait(timeout)

    @contextlib.contextmanager
    def owning(self, pgid: int) -> Iterator[None]:
        """Own a process group while the block runs: cancelling kills it, even if cancelled already."""
        with self._lock:
            self._groups.add(pgid)
        try:
            if self.cancelled:
                kill_group(pgid)
            yield
        finally:
            with self._lock:
                self._groups.discard(pgid)
