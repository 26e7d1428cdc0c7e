"""`gpudoctor` itself: the full diagnosis on a terminal (the TUI), as plain text, JSON or Markdown."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gpudoctor import __version__
from gpudoctor.cli import COMMANDS
from gpudoctor.cli.common import (
    OneLineParser,
    add_report_file_arguments,
    existing_folder,
    positive_int,
    progress,
    report_files,
    run_and_report,
    seconds,
    wants_progress,
)
from gpudoctor.handoff import DoctorAppRequest
from gpudoctor.model import Device
from gpudoctor.process.session import ExitCode


class _KeepsCommandList(argparse.HelpFormatter):
    """argparse's help, the description wrapped as usual but the command list's lines kept as they are."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        return "".join(indent + line for line in text.splitlines(keepends=True))


def _command_list() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  gpudoctor {name:<{width}}  {info.summary}" for name, info in COMMANDS.items()]
    return "\n".join(["commands (each has --help):", *lines])


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gpudoctor",
        description="Check whether this GPU custom-op stack (driver, CUDA, torch, MAX, Mojo) works, "
        "and if not, what breaks. Exit status: 0 healthy, 1 a problem found, 2 usage error, "
        "130/143 interrupted by SIGINT/SIGTERM (what had finished is still printed).",
        epilog=_command_list(),
        formatter_class=_KeepsCommandList,
    )
    parser.add_argument("--version", action="version", version=f"gpudoctor {__version__}")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document (for CI)")
    output.add_argument("--markdown", action="store_true", help="print a Markdown report for a bug report")
    output.add_argument("--plain", action="store_true", help="plain text even on a terminal (no TUI)")
    parser.add_argument("--python", metavar="PATH", help="the interpreter to examine (default: this one)")
    parser.add_argument("--no-probes", action="store_true", help="inventory only: run no probe")
    parser.add_argument("--only", metavar="ID", action="append", help="run only this probe (and what it needs)")
    parser.add_argument(
        "--device",
        choices=[d.value for d in (Device.CPU, Device.CUDA)],
        action="append",
        help="run only the variants for this device",
    )
    parser.add_argument(
        "--jobs", "-j", type=positive_int, default=None, help="probes run at once (default: one per CPU, 2 to 16)"
    )
    parser.add_argument("--timeout", type=seconds, metavar="S", help="override every probe's timeout")
    parser.add_argument(
        "--probes", type=existing_folder, metavar="DIR", help="a folder of probes with its catalog.toml"
    )
    parser.add_argument("--list", action="store_true", help="list the probes and exit")
    add_report_file_arguments(parser)
    return parser


def list_probes(probe_dir: Path | None) -> int:
    from gpudoctor.suite.catalog import default_probe_dir, load_catalog

    for spec in load_catalog(probe_dir or default_probe_dir()):
        devices = ",".join(d.value for d in spec.devices)
        after = f" after {','.join(spec.after)}" if spec.after else ""
        print(f"{spec.id:<28} stage {spec.stage}  [{devices}]{after}  {spec.title}")
    return ExitCode.OK


def run(argv: Sequence[str]) -> int | DoctorAppRequest:
    options = build_parser().parse_args(argv)
    if options.list:
        return list_probes(options.probes)

    from gpudoctor.doctor import DoctorOptions, default_jobs, examine, suite_of
    from gpudoctor.examination import Events

    doctor_options = DoctorOptions(
        python=options.python,
        probe_dir=options.probes,
        only=tuple(options.only) if options.only else None,
        devices=tuple(Device(d) for d in options.device) if options.device else None,
        jobs=options.jobs or default_jobs(),
        timeout_s=options.timeout,
        run_probes=not options.no_probes,
    )
    subject = suite_of(doctor_options)
    if not (options.json or options.markdown or options.plain) and sys.stdin.isatty() and sys.stdout.isatty():
        return DoctorAppRequest(subject, doctor_options, report_files(options))  # the program starts the TUI with it
    events = Events(result=progress if wants_progress(options) else None)
    return run_and_report(lambda scope: examine(subject, doctor_options, events, scope), options)
