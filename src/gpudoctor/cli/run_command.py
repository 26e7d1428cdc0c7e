"""`gpudoctor run [options] -- CMD ARGS...`: the user's own reproducer, run in isolation and diagnosed."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from gpudoctor.cli.common import OneLineParser, add_report_file_arguments, examine_on_its_face, seconds
from gpudoctor.errors import GpuDoctorError
from gpudoctor.handoff import DoctorAppRequest


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gpudoctor run",
        description="Run your own command (a script that crashes, hangs or fails) in a process group of its own "
        "with a time limit and faulthandler on, and report how it ended: the signal, every thread's Python "
        "frames, native frames from gdb where it is installed (a crashing command is run once more under it; a "
        "hanging one is attached before the kill), the libraries it had mapped, and what the knowledge base and "
        "the pre-flight checks make of it. `python` and `*.py` in the command run with --python. "
        "Exit status: 0 it passed, 1 it failed, crashed or timed out, 2 usage error, 130/143 interrupted.",
        usage="gpudoctor run [options] -- CMD [ARGS ...]",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document")
    output.add_argument("--markdown", action="store_true", help="print a Markdown report for a bug report")
    output.add_argument("--plain", action="store_true", help="plain text (the default)")
    output.add_argument("--tui", action="store_true", help="the interactive view, on a terminal")
    parser.add_argument("--python", metavar="PATH", help="the interpreter examined, and the one `python` runs")
    parser.add_argument("--timeout", type=seconds, metavar="S", default=600.0, help="limit (default 600 s)")
    parser.add_argument("--no-debugger", action="store_true", help="no gdb: no native frames, no second run")
    parser.add_argument(
        "--no-instruments",
        action="store_true",
        help="on a GPU, do not rerun a failure synchronously and under compute-sanitizer (the default does)",
    )
    parser.add_argument(
        "--sanitize",
        action="store_true",
        help="on a GPU, rerun the command under compute-sanitizer also when it passes (a read out of bounds can "
        "still print a plausible answer)",
    )
    parser.add_argument(
        "--no-call-checks",
        action="store_true",
        help="do not check each custom-op call against what its op declares (the default does, inside your program, "
        "once it imports MAX's torch bridge)",
    )
    add_report_file_arguments(parser)
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """gpudoctor's own options, and the command after ``--`` (required: a command's options are its own)."""
    argv = list(argv)
    if "--" not in argv:
        if any(a in ("-h", "--help") for a in argv):
            return argv, []
        raise GpuDoctorError("give the command after --, e.g. gpudoctor run -- python repro.py")
    at = argv.index("--")
    command = argv[at + 1 :]
    if not command:
        raise GpuDoctorError("no command after --")
    return argv[:at], command


def run(argv: Sequence[str]) -> int | DoctorAppRequest:
    from gpudoctor.doctor import DoctorOptions
    from gpudoctor.reproducer.command import Reproducer
    from gpudoctor.reproducer.subject import UserCommand

    own, command = split_command(argv)
    options = build_parser().parse_args(own)
    if options.sanitize and options.no_instruments:
        raise GpuDoctorError("--sanitize asks for the instruments that --no-instruments turns off: give one of them")
    subject = UserCommand(
        Reproducer(argv=tuple(command), cwd=Path.cwd(), timeout_s=options.timeout, python=options.python,
                   debugger=not options.no_debugger),
        instruments=not options.no_instruments,
        sanitize=options.sanitize,
        call_checks=not options.no_call_checks,
    )  # fmt: skip
    return examine_on_its_face(subject, DoctorOptions(python=options.python, jobs=1), options)
