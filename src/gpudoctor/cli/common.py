"""What every subcommand shares: argument types, output, progress lines and the way a signal stops a session.

Exit codes (stable, documented in README.md): 0 healthy, 1 a problem found, 2 bad input or usage,
130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from gpudoctor.cancel import CancelScope
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import ProbeResult, Report

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


class Stop:
    """The session's cancel scope and the signal that set it (None while nobody asked to stop)."""

    def __init__(self) -> None:
        self.scope = CancelScope()
        self.signal: int | None = None

    @property
    def exit_code(self) -> int | None:
        """128 + the signal number (130 for SIGINT, 143 for SIGTERM), or None when not stopped."""
        return None if self.signal is None else 128 + self.signal


@contextlib.contextmanager
def stop_on_signals() -> Iterator[Stop]:
    """SIGINT and SIGTERM cancel the session (every probe's process group is killed at once) instead of
    raising somewhere in the middle; the work then returns what had finished. Handlers are restored after."""
    stop = Stop()

    def handler(signum: int, _frame: FrameType | None) -> None:
        if stop.signal is None:
            stop.signal = signum
        stop.scope.cancel(f"stopped by {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def emit(report: Report, options: argparse.Namespace) -> None:
    """The report on stdout as JSON, Markdown or plain text, as the options say."""
    if getattr(options, "json", False):
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    elif getattr(options, "markdown", False):
        from gpudoctor.render import to_markdown

        sys.stdout.write(to_markdown(report))
    else:
        from gpudoctor.render import to_text

        sys.stdout.write(to_text(report))
    sys.stdout.flush()


def progress(result: ProbeResult) -> None:
    sys.stderr.write(f"  {result.outcome.value:<8} {result.id} ({result.duration_s:.1f} s)\n")
    sys.stderr.flush()


def wants_progress(options: argparse.Namespace) -> bool:
    return not (getattr(options, "json", False) or getattr(options, "markdown", False)) and sys.stderr.isatty()


def load_report_file(path: Path) -> Report:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Report.from_dict(data)
    except OSError as error:
        raise GpuDoctorError(f"{path}: cannot read: {error.strerror or error}") from error
    except (ValueError, KeyError, TypeError) as error:
        raise GpuDoctorError(f"{path}: not a gpudoctor --json report ({type(error).__name__}: {error})") from error


def finish(report: Report, options: argparse.Namespace, stop: Stop) -> int:
    """Print the report (partial if the session was stopped) and give the exit status."""
    emit(report, options)
    if stop.exit_code is not None:
        sys.stderr.write(f"gpudoctor: {stop.scope.reason}; kept the runs that had ended\n")
        return stop.exit_code
    return report.exit_code
