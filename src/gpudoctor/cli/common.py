"""What every subcommand shares: argument types, output, progress lines and the way a signal stops a session.

Exit codes (stable, documented in README.md): 0 healthy, 1 a problem found, 2 bad input or usage,
130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import NoReturn

from gpudoctor.cancel import Cancelled, CancelScope
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import ProbeResult, Report
from gpudoctor.textfile import read_text

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


MAX_SECONDS = 24 * 3600.0  # no limit the doctor takes is longer than a day
MAX_JOBS = 256


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``gpudoctor: error: ...``, exit 2) like every other error."""

    def error(self, message: str) -> NoReturn:
        raise GpuDoctorError(message, hint=f"{self.prog} --help")


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}: {text!r}")
        return value

    parse.__name__ = "whole number"
    return parse


positive_int = whole_number(1, MAX_JOBS)


def seconds(text: str) -> float:
    """An argument type: a finite number of seconds above 0 and at most a day (``inf`` or ``nan`` would turn
    every limit off)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"must be seconds above 0 and at most {MAX_SECONDS:g}: {text!r}")
    return value


def existing_folder(text: str) -> Path:
    """An argument type: a folder that exists."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such folder")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a folder")
    return path


def existing_file(text: str) -> Path:
    """An argument type: a regular file that exists (a pipe or device would block or never end)."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, not a file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: not a regular file")
    return path


def folder_to_write(text: str) -> Path:
    """An argument type: a folder that exists or can be made (nothing that is a file on the way)."""
    path = Path(text)
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                raise argparse.ArgumentTypeError(f"{text}: {part} is not a folder")
            break
    return path


def file_to_write(text: str) -> Path:
    """An argument type: a file that can be written (not a folder; its folder exists or can be made)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, not a file")
    folder_to_write(str(path.parent))
    return path


def add_report_file_arguments(parser: argparse.ArgumentParser) -> None:
    """--junit, --save-json and --save-markdown: the same report also written to files, beside any output (so
    one run feeds a CI system's test view, an artifact and a bug report)."""
    files = parser.add_argument_group("report files, beside any output")
    files.add_argument("--junit", type=file_to_write, metavar="PATH", help="JUnit XML, one test case per probe run")
    files.add_argument("--save-json", type=file_to_write, metavar="PATH", help="the --json document")
    files.add_argument("--save-markdown", type=file_to_write, metavar="PATH", help="the --markdown report")


def write_report_files(report: Report, options: argparse.Namespace) -> None:
    """The files asked for, each written whole or not at all."""
    from gpudoctor.atomic import atomic_write

    if (path := getattr(options, "junit", None)) is not None:
        from gpudoctor.junit import to_junit

        atomic_write(path, to_junit(report), mode=0o644)
    if (path := getattr(options, "save_json", None)) is not None:
        atomic_write(path, json.dumps(report.to_dict(), indent=2) + "\n", mode=0o644)
    if (path := getattr(options, "save_markdown", None)) is not None:
        from gpudoctor.render import to_markdown

        atomic_write(path, to_markdown(report), mode=0o644)


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
    raising somewhere in the middle; the work then returns what had finished. Handlers are restored after,
    unless a signal stopped the work: the command is then on its way out with 128 + that signal, and one more
    Ctrl-C while the interpreter shuts down must not turn that into a death by signal (so they are ignored)."""
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
            signal.signal(sig, old if stop.signal is None else signal.SIG_IGN)


def run_and_report(work: Callable[[CancelScope], Report], options: argparse.Namespace) -> int:
    """Run ``work`` under a session scope that SIGINT and SIGTERM cancel, then print its report (what had ended,
    when stopped) and give the exit status. The handlers stay in place while the report is printed: a second
    Ctrl-C cannot cut the report short or leave anything running."""
    with stop_on_signals() as stop:
        try:
            report: Report | None = work(stop.scope)
        except Cancelled:  # stopped before anything ran (while asking the interpreter, say)
            report = None
        return finish(report, options, stop)


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


MAX_REPORT_BYTES = 64 * 1024 * 1024


def load_report_file(path: Path) -> Report:
    """A saved ``gpudoctor --json`` report (bounded read, this schema version); anything else is a usage error."""
    text = read_text(path, MAX_REPORT_BYTES)
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        return Report.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        what = f"missing field {error}" if isinstance(error, KeyError) else str(error)
        raise GpuDoctorError(f"{path}: not a gpudoctor --json report ({type(error).__name__}: {what[:200]})") from None


def finish(report: Report | None, options: argparse.Namespace, stop: Stop) -> int:
    """Print the report (partial if the session was stopped) and give the exit status."""
    if report is None:
        sys.stderr.write(f"gpudoctor: {stop.scope.reason}; nothing had finished\n")
        return stop.exit_code or 130
    write_report_files(report, options)
    emit(report, options)
    if stop.exit_code is not None:
        sys.stderr.write(f"gpudoctor: {stop.scope.reason}; kept the runs that had ended\n")
        return stop.exit_code
    return report.exit_code
