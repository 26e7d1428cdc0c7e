"""Turn what a dead probe left behind into data: signal names, faulthandler frames, traceback tails.

Pure functions over exit codes and captured text, so they are tested without running anything.
"""

from __future__ import annotations

import re
import signal

from gpudoctor.model import Frame

_THREAD_HEADER = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)[^\n]*\(most recent call first\):\s*$")
_FAULT_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<function>.+?)\s*$')
_TRACEBACK_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+), in (?P<function>.+?)\s*$')
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
        frame = _TRACEBACK_FRAME.match(line)
        if frame:
            frames.append(Frame(frame.group("file"), int(frame.group("line")), frame.group("function")))
            continue
        exception = _EXCEPTION_LINE.match(line)
        if exception:
            exc_type, message = exception.group("type"), exception.group("message")
    return exc_type, message, tuple(reversed(frames))
