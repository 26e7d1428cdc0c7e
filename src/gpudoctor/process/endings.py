"""Turn what a dead child left behind into data: signal names, faulthandler frames, traceback tails, and
``classify_ending``, the rules every run's ending shares (a probe's, a user's command's).

Pure functions over exit codes and captured text, so they are tested without running anything.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from gpudoctor.model import Frame, Outcome
from gpudoctor.redact import redact_text

_THREAD_HEADER = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)[^\n]*\(most recent call first\):\s*$")
_FAULT_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<function>.+?)\s*$')
TRACEBACK_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+), in (?P<function>.+?)\s*$')
_EXCEPTION_LINE = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault))(?::\s?(?P<message>.*))?$"
)


def signal_name(number: int) -> str:
    """``11`` -> ``"SIGSEGV"``; an unknown number keeps its value visible."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def fatal_error(stderr: str) -> str | None:
    """The faulthandler headline, e.g. "Segmentation fault" from "Fatal Python error: Segmentation fault"."""
    for line in stderr.splitlines():
        if line.startswith("Fatal Python error: "):
            return line.removeprefix("Fatal Python error: ").strip()
    return None


def faulthandler_frames(stderr: str) -> tuple[Frame, ...]:
    """Every frame of every thread in the last fatal-error dump (or a requested dump), innermost first.

    The thread that crashed is labelled "current"; others by their id, so a crash in a worker thread
    (seed 000: a ``concurrent.futures`` thread inside MAX) stays visible.
    """
    lines = stderr.splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith("Fatal Python error:")), default=None)
    if start is None:  # a dump on request (faulthandler.register) has no headline
        start = next((i for i, line in enumerate(lines) if _THREAD_HEADER.match(line)), None)
    if start is None:
        return ()
    frames: list[Frame] = []
    thread: str | None = None
    for line in lines[start:]:
        header = _THREAD_HEADER.match(line)
        if header:
            thread = "current" if header.group(1) == "Current thread" else header.group(2)
            continue
        frame = _FAULT_FRAME.match(line)
        if frame and thread is not None:
            number = frame.group("line")
            frames.append(
                Frame(
                    file=frame.group("file"),
                    line=int(number) if number.isdigit() else None,
                    function=frame.group("function"),
                    thread=thread,
                )
            )
    return tuple(frames)


def traceback_tail(stderr: str) -> tuple[str | None, str | None, tuple[Frame, ...]]:
    """Exception type, message and frames (innermost first) of the last Python traceback in ``stderr``."""
    lines = stderr.splitlines()
    start = max(
        (i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")), default=None
    )
    if start is None:
        return None, None, ()
    frames: list[Frame] = []
    exc_type: str | None = None
    message: str | None = None
    for line in lines[start + 1 :]:
        frame = TRACEBACK_FRAME.match(line)
        if frame:
            frames.append(Frame(frame.group("file"), int(frame.group("line")), frame.group("function")))
            continue
        exception = _EXCEPTION_LINE.match(line)
        if exception:
            exc_type, message = exception.group("type"), exception.group("message")
    return exc_type, message, tuple(reversed(frames))


LAST_LINE_LIMIT = 300  # characters of stderr's last line a summary quotes


@dataclass(frozen=True)
class Ending:
    """How a child ended by the rules every run shares: a timeout, a death by signal (a crash), status 0 or another
    status; with what its stderr says (faulthandler's headline and frames, the last traceback, the last line),
    redacted. A kind of run adds its own reading on top: a probe its side channel, a command its children's
    signals. Frames are redacted; texts are not yet (a summary made of them is redacted as a whole)."""

    outcome: Outcome  # TIMEOUT, CRASH, PASS or FAIL
    returncode: int
    signal: str | None  # "SIGSEGV" when it was killed by a signal
    headline: str | None  # faulthandler's "Fatal Python error: ..." headline
    dumped: tuple[Frame, ...]  # faulthandler's frames of every thread (a crash's, or the dump before a kill)
    exception_type: str | None  # of the last traceback on stderr
    message: str | None
    traceback: tuple[Frame, ...]  # that traceback's frames, innermost first
    last_line: str | None  # stderr's last line that is not blank, cut at LAST_LINE_LIMIT

    def killed(self, where: str = "", name: str | None = None) -> str:
        """The summary of a death by signal: killed by SIGSEGV <where> (<headline>); ``name`` for a signal read
        otherwise (a child's)."""
        parts = (f"killed by {name or self.signal}", where, f"({self.headline})" if self.headline else "")
        return " ".join(p for p in parts if p)

    def exited(self, context: str = "") -> str:
        """The summary of an exit: exited with status N: Exc: message, or else exited with status N<context>: <the
        last line>."""
        if self.exception_type:
            return f"exited with status {self.returncode}: {self.exception_type}: {self.message or ''}".rstrip(": ")
        said = f": {self.last_line}" if self.last_line else ""
        return f"exited with status {self.returncode}{context}{said}"


def redacted(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """Frames with private paths taken out of their file names."""
    return tuple(Frame(redact_text(f.file), f.line, f.function, f.thread) for f in frames)


def classify_ending(returncode: int, timed_out: bool, stderr: str) -> Ending:
    """Read an ending by the shared rules (see Ending)."""
    exception_type, message, traceback = traceback_tail(stderr)
    last_line = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), None)
    if timed_out:
        outcome = Outcome.TIMEOUT
    elif returncode < 0:
        outcome = Outcome.CRASH
    else:
        outcome = Outcome.PASS if returncode == 0 else Outcome.FAIL
    return Ending(
        outcome=outcome,
        returncode=returncode,
        signal=signal_name(-returncode) if returncode < 0 else None,
        headline=fatal_error(stderr),
        dumped=redacted(faulthandler_frames(stderr)),
        exception_type=exception_type,
        message=message,
        traceback=redacted(traceback),
        last_line=last_line[:LAST_LINE_LIMIT] if last_line else None,
    )
