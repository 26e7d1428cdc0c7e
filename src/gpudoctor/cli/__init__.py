"""The command-line face: one module per subcommand, each parsing its options and rendering a Report.

``gpudoctor`` (doctor_command), ``gpudoctor kernel`` (kernel_command), ``gpudoctor matrix`` (matrix_command),
``gpudoctor sweep`` (sweep_command), ``gpudoctor patch`` (patch_command), ``gpudoctor scan`` (scan_command),
``gpudoctor fleet`` (fleet_command).
Exit codes (gpudoctor.session.ExitCode): 0 healthy, 1 a problem found, 2 bad input or usage, 130 interrupted,
143 terminated.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence

from gpudoctor.bytecode import keep_own_bytecode
from gpudoctor.cli.output import guarded_stdout
from gpudoctor.errors import GpuDoctorError
from gpudoctor.session import ExitCode


def run(argv: Sequence[str] | None = None) -> int:
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
    if argv[:1] == ["matrix"]:
        from gpudoctor.cli import matrix_command

        return matrix_command.run(argv[1:])
    from gpudoctor.cli import doctor_command

    return doctor_command.run(argv)


def main(argv: Sequence[str] | None = None) -> int:
    keep_own_bytecode()  # before the command's modules are imported (lazily, in run), so they compile once
    try:
        with guarded_stdout():
            return run(argv)
    except GpuDoctorError as error:
        _say(error.one_line())
        return error.exit_code
    except KeyboardInterrupt:  # outside a session (while parsing, say): nothing is running
        _say("gpudoctor: interrupted")
        return ExitCode.INTERRUPTED
    except OSError as error:  # the disk, not the doctor: a folder that cannot be written, a disk that is full
        where = f"{error.filename}: " if error.filename else ""
        _say(f"gpudoctor: error: {where}{error.strerror or error}")
        return ExitCode.USAGE


def _say(line: str) -> None:
    """One line on stderr (made safe for a terminal), if there is a stderr to write to."""
    from gpudoctor.safetext import safe_text

    with contextlib.suppress(OSError, AttributeError, ValueError):
        sys.stderr.write(safe_text(line) + "\n")
        sys.stderr.flush()
