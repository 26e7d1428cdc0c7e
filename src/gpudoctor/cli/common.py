"""What every subcommand shares: argument types, output and progress lines, and running work as a session.

How a session stops and what it exits with is ``gpudoctor.process.session``'s (exit codes there, documented in
README.md).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import ProbeResult, Report
from gpudoctor.process.cancel import Cancelled, CancelScope
from gpudoctor.process.session import ExitCode, Session, stop_on_signals
from gpudoctor.report.codec import encode
from gpudoctor.report.files import ReportFiles

if TYPE_CHECKING:  # the doctor is imported where a subject is examined, not by every command's parser
    from gpudoctor.doctor import DoctorOptions
    from gpudoctor.handoff import DoctorAppRequest
    from gpudoctor.subject import Subject

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


def add_cell_source_arguments(parser: argparse.ArgumentParser, inherit_help: str) -> None:
    """Where sweep and bisect cells get their packages: --find-links (a wheelhouse, repeatable), --offline and
    --inherit; ``cell_sources`` checks them."""
    parser.add_argument("--find-links", type=existing_folder, action="append", metavar="DIR", help="a wheelhouse")
    parser.add_argument("--offline", action="store_true", help="install from the wheelhouses and uv's cache only")
    parser.add_argument("--inherit", metavar="PYTHON", help=inherit_help)


def cell_sources(options: argparse.Namespace) -> tuple[tuple[Path, ...], bool, str | None]:
    """The wheelhouses (absolute), whether to stay offline, and the interpreter cells inherit from; a usage error
    for --offline without a wheelhouse and for an --inherit that is no interpreter."""
    if options.offline and not options.find_links:
        raise GpuDoctorError("--offline needs --find-links DIR (the wheelhouse to install from)")
    if options.inherit is not None and not Path(options.inherit).is_file():
        raise GpuDoctorError(f"--inherit {options.inherit!r}: no such interpreter")
    return tuple(Path(f).absolute() for f in options.find_links or ()), bool(options.offline), options.inherit


def report_files(options: argparse.Namespace) -> ReportFiles:
    """The files --junit, --save-json and --save-markdown ask for."""
    return ReportFiles(
        junit=getattr(options, "junit", None),
        json=getattr(options, "save_json", None),
        markdown=getattr(options, "save_markdown", None),
    )


def examine_on_its_face(
    subject: Subject, doctor_options: DoctorOptions, options: argparse.Namespace
) -> int | DoctorAppRequest:
    """`gpudoctor run` and `explain`: the subject in the TUI when --tui asks (on a terminal only), else examined and
    reported in the face the options name."""
    from gpudoctor.doctor import examine
    from gpudoctor.handoff import DoctorAppRequest

    if options.tui:
        if not sys.stdout.isatty():
            raise GpuDoctorError("--tui needs a terminal; use --plain, --json or --markdown")
        return DoctorAppRequest(subject, doctor_options, report_files(options))
    return run_and_report(lambda scope: examine(subject, doctor_options, cancel=scope), options)


def run_and_report(work: Callable[[CancelScope], Report], options: argparse.Namespace) -> int:
    """Run ``work`` under a session that SIGINT and SIGTERM stop, then print its report (what had ended, when
    stopped) and give the exit status. The handlers stay in place while the report is printed: a second Ctrl-C
    cannot cut the report short or leave anything running."""
    with stop_on_signals() as session:
        try:
            report: Report | None = work(session.scope)
        except Cancelled:  # stopped before anything ran (while asking the interpreter, say)
            report = None
        return finish(report, options, session)


def emit(report: Report, options: argparse.Namespace) -> None:
    """The report on stdout as JSON, Markdown or plain text, as the options say."""
    if getattr(options, "json", False):
        sys.stdout.write(json.dumps(encode(report), indent=2) + "\n")
    elif getattr(options, "markdown", False):
        from gpudoctor.report.text import to_markdown

        sys.stdout.write(to_markdown(report))
    else:
        from gpudoctor.report.text import to_text

        sys.stdout.write(to_text(report))
    sys.stdout.flush()


def progress(result: ProbeResult) -> None:
    patched = ", with a patch" if result.patched else ""  # a patch's rerun: not the stack as it is
    sys.stderr.write(f"  {result.outcome.value:<8} {result.id} ({result.duration_s:.1f} s{patched})\n")
    sys.stderr.flush()


def wants_progress(options: argparse.Namespace) -> bool:
    return not (getattr(options, "json", False) or getattr(options, "markdown", False)) and sys.stderr.isatty()


def finish(report: Report | None, options: argparse.Namespace, session: Session) -> int:
    """Print the report (partial if the session was stopped) and give the exit status."""
    if report is None:
        sys.stderr.write(session.note("nothing had finished"))
        return session.exit_status(ExitCode.INTERRUPTED)
    report_files(options).write(report)
    emit(report, options)
    if session.stopped:
        sys.stderr.write(session.note())
    return session.exit_status(report.exit_code)
