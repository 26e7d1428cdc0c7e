"""`gpudoctor explain [FILE | -]`: a log or a pasted traceback (a CI job's log, a colleague's report) diagnosed
against this machine's inventory, or --python's, by the same knowledge as every run."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gpudoctor.cli.common import OneLineParser, add_report_file_arguments, examine_on_its_face
from gpudoctor.errors import GpuDoctorError
from gpudoctor.handoff import DoctorAppRequest


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gpudoctor explain",
        description="Explain a log or a pasted traceback: which known failure or class of failure it shows, or, "
        "when none, which component failed in which phase and the experiment to run next — judged against this "
        "machine's inventory (or --python's). The log is read as untrusted input: at most 64 MiB of UTF-8 text. "
        "Exit status: 1 the log shows a problem, 2 it cannot be read or usage error.",
    )
    parser.add_argument("log", nargs="?", default="-", help="the log file, or - for standard input (the default)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document")
    output.add_argument("--markdown", action="store_true", help="print a Markdown report for a bug report")
    output.add_argument("--plain", action="store_true", help="plain text (the default)")
    output.add_argument("--tui", action="store_true", help="the interactive view, on a terminal")
    parser.add_argument("--python", metavar="PATH", help="the interpreter whose stack the log is judged against")
    add_report_file_arguments(parser)
    return parser


def run(argv: Sequence[str]) -> int | DoctorAppRequest:
    from gpudoctor.doctor import DoctorOptions
    from gpudoctor.reproducer.log import read_log
    from gpudoctor.reproducer.pasted import PastedLog

    options = build_parser().parse_args(list(argv))
    if options.tui and options.log == "-":
        raise GpuDoctorError("--tui reads the terminal: give the log as a file (gpudoctor explain --tui FILE)")
    text, name = read_log(options.log)  # before anything runs: what cannot be read is one line, exit 2
    return examine_on_its_face(PastedLog(text, name), DoctorOptions(python=options.python, jobs=1), options)
