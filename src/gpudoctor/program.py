"""The program `gpudoctor` (and `python -m gpudoctor`): runs the command the CLI parsed, and where the command asks for
the terminal (gpudoctor.handoff), starts the TUI with it. One line on stderr for every error a user can act on.

Exit codes (gpudoctor.process.session.ExitCode): 0 healthy, 1 a problem found, 2 bad input or usage, 130 interrupted,
143 terminated.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence

from gpudoctor.errors import GpuDoctorError
from gpudoctor.process.session import ExitCode
from gpudoctor.suite.bytecode import keep_own_bytecode


def main(argv: Sequence[str] | None = None) -> int:
    keep_own_bytecode()  # before the command's modules are imported (lazily, in run), so they compile once
    from gpudoctor.cli import run
    from gpudoctor.cli.output import guarded_stdout

    try:
        with guarded_stdout():
            outcome = run(argv)
            return outcome if isinstance(outcome, int) else _terminal(outcome)
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


def _terminal(request: object) -> int:
    """Start the TUI a command asked for (Textual is imported only here)."""
    from gpudoctor.handoff import DoctorAppRequest, FleetAppRequest

    if isinstance(request, DoctorAppRequest):
        from gpudoctor.tui import run_tui

        return run_tui(request.subject, request.options, files=request.files)
    assert isinstance(request, FleetAppRequest)
    from gpudoctor.tui.fleet_app import run_fleet_tui

    code, report = run_fleet_tui(request.options)
    if report is not None:
        request.after(report)
    return code


def _say(line: str) -> None:
    """One line on stderr (made safe for a terminal), if there is a stderr to write to."""
    from gpudoctor.safetext import safe_text

    with contextlib.suppress(OSError, AttributeError, ValueError):
        sys.stderr.write(safe_text(line) + "\n")
        sys.stderr.flush()
