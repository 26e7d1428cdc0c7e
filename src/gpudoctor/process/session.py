"""How a session stops and what it exits with: the one policy every command and face follows.

A session is the root cancel scope of one command and the first reason it was asked to stop. SIGINT, SIGTERM and a
TUI's `q` all end in ``Session.stop``: every child process group dies at once (``cancel``), the work returns what
had ended, and the exit status says the work was cut short (130 interrupted, 143 terminated) — else it is the
result's own (0 healthy, 1 a problem, 2 bad input or usage).
"""

from __future__ import annotations

import contextlib
import enum
import signal
from collections.abc import Iterator
from types import FrameType

from gpudoctor.process.cancel import CancelScope


class ExitCode(enum.IntEnum):
    """The exit statuses of every gpudoctor command (README.md documents them)."""

    OK = 0
    PROBLEM = 1
    USAGE = 2
    INTERRUPTED = 128 + signal.SIGINT  # 130: Ctrl-C, SIGINT, a TUI's q
    TERMINATED = 128 + signal.SIGTERM  # 143: SIGTERM


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Session:
    """One command's root scope, and why and with what status it was stopped (None while nobody asked)."""

    def __init__(self) -> None:
        self.scope = CancelScope()
        self.exit_code: int | None = None

    @property
    def stopped(self) -> bool:
        return self.exit_code is not None

    @property
    def reason(self) -> str:
        return self.scope.reason or "stopped"

    def stop(self, reason: str, exit_code: int = ExitCode.INTERRUPTED) -> None:
        """Stop everything the session runs, now; the first stop decides the reason and the status."""
        if self.exit_code is None:
            self.exit_code = exit_code
        self.scope.cancel(reason)

    def stop_by_signal(self, signum: int) -> None:
        """A stop by signal: status 128 + its number, as a shell reports a death by that signal."""
        self.stop(f"stopped by {signal.Signals(signum).name}", 128 + signum)

    def exit_status(self, result_code: int, *, cut_short: bool = True) -> int:
        """The command's exit status: the stop's when the work was cut short by it, else the result's."""
        return self.exit_code if self.exit_code is not None and cut_short else result_code

    def note(self, kept: str = "kept the runs that had ended") -> str:
        """The line a stopped command leaves on stderr after what it kept: why it stopped, and what was kept."""
        return f"gpudoctor: {self.reason}; {kept}\n"


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Session]:
    """SIGINT and SIGTERM stop the session (every child's process group is killed at once) instead of raising
    somewhere in the middle; the work then returns what had finished. Handlers are restored after, unless a
    signal stopped the work: the command is then on its way out with 128 + that signal, and one more Ctrl-C while
    the interpreter shuts down must not turn that into a death by signal (so they are ignored)."""
    session = Session()

    def handler(signum: int, _frame: FrameType | None) -> None:
        session.stop_by_signal(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield session
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if not session.stopped else signal.SIG_IGN)
