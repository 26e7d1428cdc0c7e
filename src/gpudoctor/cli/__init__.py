"""The command-line face: one module per subcommand, each parsing its options and rendering a Report.

``gpudoctor`` (doctor_command), ``gpudoctor kernel`` (kernel_command), ``gpudoctor matrix`` (matrix_command),
``gpudoctor sweep`` (sweep_command), ``gpudoctor patch`` (patch_command), ``gpudoctor scan`` (scan_command),
``gpudoctor fleet`` (fleet_command), ``gpudoctor run`` (run_command), ``gpudoctor bisect`` (bisect_command).
The program that runs them, error handling and exit codes included, is gpudoctor.program.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from gpudoctor.handoff import Handoff


def run(argv: Sequence[str] | None = None) -> int | Handoff:
    """Parse and run one command; a command that wants the terminal's interactive face returns a request for it
    (gpudoctor.program starts the TUI)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["kernel"]:
        from gpudoctor.cli import kernel_command

        return kernel_command.run(argv[1:])
    if argv[:1] == ["sweep"]:
        from gpudoctor.cli import sweep_command

        return sweep_command.run(argv[1:])
    if argv[:1] == ["patch"]:
        from gpudoctor.cli import patch_command

        return patch_command.run(argv[1:])
    if argv[:1] == ["fleet"]:
        from gpudoctor.cli import fleet_command

        return fleet_command.run(argv[1:])
    if argv[:1] == ["scan"]:
        from gpudoctor.cli import scan_command

        return scan_command.run(argv[1:])
    if argv[:1] == ["run"]:
        from gpudoctor.cli import run_command

        return run_command.run(argv[1:])
    if argv[:1] == ["bisect"]:
        from gpudoctor.cli import bisect_command

        return bisect_command.run(argv[1:])
    if argv[:1] == ["matrix"]:
        from gpudoctor.cli import matrix_command

        return matrix_command.run(argv[1:])
    from gpudoctor.cli import doctor_command

    return doctor_command.run(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The program (gpudoctor.program.main), for console scripts installed before it moved there."""
    from gpudoctor.program import main as program_main

    return program_main(argv)
