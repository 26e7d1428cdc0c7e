"""compute-sanitizer's report read into data: each error's kind, the kernel, its source line, the thread and block,
the access and how far it fell from the nearest allocation, the failed API call, and the host frames of the launch.

The text is the sanitizer's own (lines prefixed ``========= ``, memcheck and initcheck alike); anything else the
program printed in between is ignored. Reading is bounded by what the caller captured: a report cut short gives
the errors read so far and no summary.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

PREFIX = "========= "
MAX_FRAMES = 40  # host frames kept per error: the launch site is among the last (Python's frames come after C's)


class ErrorKind(enum.StrEnum):
    """What the sanitizer caught, by the mechanism that explains it."""

    OUT_OF_BOUNDS = "out-of-bounds"  # an access outside every allocation
    MISALIGNED = "misaligned"  # an access at an address not a multiple of its size
    UNINITIALIZED = "uninitialized"  # initcheck: memory read before anything wrote it
    DEVICE_ASSERT = "device-assert"  # a kernel's assert() fired
    API_ERROR = "api-error"  # a CUDA API call returned an error (a launch refused, out of memory, ...)
    RACE = "race"  # racecheck: two threads touch one shared-memory location with no barrier between them
    SYNC = "sync"  # synccheck: a barrier not every thread of the block (or warp) reaches
    OTHER = "other"


@dataclass(frozen=True)
class HostFrame:
    function: str
    file: str | None = None  # a Python frame's file name (the sanitizer keeps only the base name), or a library
    line: int | None = None

    @property
    def is_python(self) -> bool:
        return self.file is not None and self.file.endswith(".py") and self.line is not None


@dataclass(frozen=True)
class SanitizerError:
    kind: ErrorKind
    headline: str  # the sanitizer's first line of the error, as printed
    access: str | None = None  # "read" or "write"
    size_bytes: int | None = None
    space: str | None = None  # "global", "shared", "local"
    kernel: str | None = None  # the kernel's name without parameters or ABI tags
    source: str | None = None  # "prog.py:14" where the toolchain emitted line info
    thread: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    distance_bytes: int | None = None  # from the nearest allocation
    direction: str | None = None  # "before" or "after" it
    allocation_bytes: int | None = None  # the nearest allocation's size
    api_call: str | None = None  # the CUDA API call that failed
    api_error: str | None = None  # its error name: cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE, ...
    api_error_text: str | None = None  # its error's words: "invalid argument"
    race: tuple[str, str, str, str] | None = None  # racecheck: (access, where, other access, where)
    hazards: int | None = None  # racecheck: how many hazards it counted for this pair
    host_frames: tuple[HostFrame, ...] = field(default_factory=tuple)

    @property
    def python_frames(self) -> tuple[HostFrame, ...]:
        return tuple(frame for frame in self.host_frames if frame.is_python)

    def launch_site(self, own_files: frozenset[str] = frozenset()) -> HostFrame | None:
        """The Python line that launched the kernel or made the call: the innermost frame in one of ``own_files``
        (base names of the user's files), else the outermost Python frame (the script's own line)."""
        frames = self.python_frames
        own = [frame for frame in frames if frame.file in own_files]
        return own[0] if own else (frames[-1] if frames else None)


@dataclass(frozen=True)
class SanitizerReport:
    errors: tuple[SanitizerError, ...]
    error_count: int | None  # from "ERROR SUMMARY: N errors"; None when the report was cut before it
    target_failed: bool  # "Target application returned an error"
    never_used_cuda: bool = False  # "Target application terminated before first instrumented API call"

    @property
    def clean(self) -> bool:
        return self.error_count == 0 and not self.errors


_ACCESS = re.compile(r"Invalid __(global|shared|local)__ (read|write|atomic) of size (\d+) bytes?")
_MISALIGNED = re.compile(r"misaligned", re.IGNORECASE)
_UNINIT = re.compile(r"Uninitialized __(global|shared)__ memory read of size (\d+) bytes?")
_API = re.compile(r'Program hit (\S+) \(error \d+\) due to "([^"]*)" on CUDA API call to (\w+)')
_AT = re.compile(r"^at (.+?)(?:\+0x[0-9a-f]+)?(?: in (\S+:\d+))?$")
_BY = re.compile(r"by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")
_NEAREST = re.compile(r"is ([\d,]+) bytes (before|after) the nearest allocation at \S+ of size ([\d,]+) bytes")
_FRAME = re.compile(r"^(?:Host|Device) Frame: ?(.*?)(?: \[0x[0-9a-f]+\])?(?: in (\S+?)(?::(\d+))?)?$")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?")
# "Error: Race reported between Read access at block_sum+0x190" and, on the lines under it, each other access:
# "and Write access at block_sum+0x130 [5268397 hazards]" (compute-sanitizer 2025.3, H100); older tools print one line.
_RACE = re.compile(
    r"Race reported between (\w+) access at (\S+(?: in \S+)?)"
    r"(?: and (\w+) access at (\S+(?: in \S+)?))?(?:\s*\[(\d+) hazards?\])?\s*$"
)
_RACE_OTHER = re.compile(r"^and (\w+) access at (\S+(?: in \S+)?)(?:\s*\[(\d+) hazards?\])?")
_SANITIZER_NOTE = re.compile(r"^Warning: |^Note: ")  # the tool's own remarks (hazard limits), not errors it found
_BARRIER = re.compile(r"Barrier error|[Dd]ivergent thread")
NEVER_USED_CUDA = "terminated before first instrumented API call"


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _kernel_name(text: str) -> str:
    """``__main__::shift_right[abi:v1,...](Array<...>)`` -> ``__main__::shift_right``; ``scale_rows`` as it is."""
    return re.split(r"[\[(<]", text, maxsplit=1)[0].strip()


def _headline(line: str) -> SanitizerError | None:
    if match := _ACCESS.search(line):
        kind = ErrorKind.MISALIGNED if _MISALIGNED.search(line) else ErrorKind.OUT_OF_BOUNDS
        return SanitizerError(kind, line, access=match[2], size_bytes=int(match[3]), space=match[1])
    if match := _UNINIT.search(line):
        return SanitizerError(ErrorKind.UNINITIALIZED, line, access="read", size_bytes=int(match[2]), space=match[1])
    if match := _API.search(line):
        return SanitizerError(ErrorKind.API_ERROR, line, api_error=match[1], api_error_text=match[2],
                              api_call=match[3])  # fmt: skip
    if match := _RACE.search(line):
        first, second = match[2], match[4]
        kernel = _kernel_name(first.split("+0x", 1)[0]) if "+0x" in first else None
        other = (match[3].lower(), second) if match[3] else ("?", "?")
        hazards = int(match[5]) if match[5] else None
        return SanitizerError(ErrorKind.RACE, line, access=match[1].lower(), space="shared", kernel=kernel,
                              race=(match[1].lower(), first, *other), hazards=hazards)  # fmt: skip
    if _BARRIER.search(line):
        return SanitizerError(ErrorKind.SYNC, line)
    if "assert" in line.lower():
        return SanitizerError(ErrorKind.DEVICE_ASSERT, line)
    if "Host API memory access error" in line or "Uninitialized" in line:
        return SanitizerError(ErrorKind.UNINITIALIZED, line)
    return SanitizerError(ErrorKind.OTHER, line)


def _detail(error: SanitizerError, line: str, frames: list[HostFrame]) -> SanitizerError:
    """``error`` with what one indented line of it adds."""
    if line.startswith(("Host Frame:", "Device Frame:")):
        if line.startswith("Host Frame:") and len(frames) < MAX_FRAMES and (match := _FRAME.match(line)):
            frames.append(HostFrame(match[1].strip(), match[2], int(match[3]) if match[3] else None))
        return error
    if line.startswith("at ") and error.kernel is None and (match := _AT.match(line)):
        if match[1].startswith("__assertfail"):  # the assert's own routine, not the kernel that called it
            return error
        return _replace(error, kernel=_kernel_name(match[1]), source=match[2])
    if match := _BY.search(line):
        numbers = tuple(int(n) for n in match.groups())
        return _replace(error, thread=numbers[:3], block=numbers[3:])
    if match := _NEAREST.search(line):
        return _replace(error, distance_bytes=_number(match[1]), direction=match[2],
                        allocation_bytes=_number(match[3]))  # fmt: skip
    if error.kind is ErrorKind.RACE and (match := _RACE_OTHER.match(line)):
        hazards = (error.hazards or 0) + (int(match[3]) if match[3] else 0)
        if error.race is not None and error.race[2] == "?":  # the first other access is the pair's
            error = _replace(error, race=(error.race[0], error.race[1], match[1].lower(), match[2]))
        return _replace(error, hazards=hazards or None)
    if "is misaligned" in line and error.kind is ErrorKind.OUT_OF_BOUNDS:
        return _replace(error, kind=ErrorKind.MISALIGNED)  # "Address 0x... is misaligned", under the headline
    if line.startswith("Uninitialized access") and error.api_call is None:
        return _replace(error, api_call=line.rsplit(" by ", 1)[-1])
    return error


def _replace(error: SanitizerError, **changes: object) -> SanitizerError:
    import dataclasses

    return dataclasses.replace(error, **changes)  # type: ignore[arg-type]


def parse(text: str) -> SanitizerReport:
    """Every error in a compute-sanitizer report, in order, with the summary's count."""
    errors: list[SanitizerError] = []
    current: SanitizerError | None = None
    frames: list[HostFrame] = []
    count: int | None = None
    failed = never_used = False

    def close() -> None:
        if current is not None:
            errors.append(_replace(current, host_frames=tuple(frames)))

    for raw in text.splitlines():
        if not raw.startswith(PREFIX.rstrip()):
            continue
        body = raw[len(PREFIX.rstrip()) :]
        line = body.strip()
        if not body.startswith("    "):  # an error's first line, or the sanitizer's own
            if match := _SUMMARY.search(line):
                count = int(match[1] or match[2])
            elif _SANITIZER_NOTE.match(line):
                pass  # "Warning: Maximum number of hazards reached ...": the tool's remark, not an error
            elif NEVER_USED_CUDA in line:
                never_used = True  # the program ended before it used CUDA at all: nothing on the GPU to check
            elif line.startswith(("Target application returned an error", "Error: process didn't terminate")):
                failed = True  # the sanitizer's word on how the program ended, not an error it found
            elif line and line != "COMPUTE-SANITIZER":
                close()
                current, frames = _headline(line), []
                continue
            close()
            current, frames = None, []
        elif current is not None:
            current = _detail(current, line, frames)
    close()
    return SanitizerReport(errors=tuple(errors), error_count=count, target_failed=failed, never_used_cuda=never_used)
