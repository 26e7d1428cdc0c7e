"""The command-line face: one module per subcommand, each parsing its options and rendering a Report; ``COMMANDS``
names them (pip's ``commands_dict``), and ``gpudoctor`` alone is doctor_command.

The program that runs them, error handling and exit codes included, is gpudoctor.program.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpudoctor.handoff import Handoff


@dataclass(frozen=True)
class CommandInfo:
    """A subcommand: the module of gpudoctor.cli that parses and runs it (imported only when it is asked for), and
    what it does in a line of `gpudoctor --help`."""

    module: str
    summary: str


COMMANDS: Mapping[str, CommandInfo] = {
    "kernel": CommandInfo("kernel_command", "run your Mojo custom-op package (a folder) on the CPU and on each GPU"),
    "run": CommandInfo("run_command", "run your own command (after --) and report how it ended"),
    "explain": CommandInfo("explain_command", "explain a log or a pasted traceback (a file, or - for stdin)"),
    "bisect": CommandInfo("bisect_command", "find the MAX release where your reproducer's ending changes"),
    "patch": CommandInfo("patch_command", "show, install or remove the workaround a finding names"),
    "scan": CommandInfo("scan_command", "find source lines the installed releases do not accept"),
    "matrix": CommandInfo("matrix_command", "the compatibility matrix: add, check, show, near, readme"),
    "sweep": CommandInfo("sweep_command", "examine one environment per torch x MAX release"),
    "fleet": CommandInfo("fleet_command", "run the doctor on every node of a Ray cluster"),
}
DOCTOR_MODULE = "doctor_command"  # `gpudoctor` with no command: the diagnosis of this stack


def run(argv: Sequence[str] | None = None) -> int | Handoff:
    """Parse and run one command; a command that wants the terminal's interactive face returns a request for it
    (gpudoctor.program starts the TUI)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = COMMANDS.get(argv[0]) if argv else None
    module = importlib.import_module(f"gpudoctor.cli.{command.module if command else DOCTOR_MODULE}")
    run_command: Callable[[list[str]], int | Handoff] = module.run
    return run_command(argv[1:] if command else argv)
