"""A sanitizer's error in the words of the user's code: which kernel, which line, which thread, which access, and
the Python line that launched it; several errors of one kernel and line are one statement with a count."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from gpudoctor.instruments.sanitizer import ErrorKind, SanitizerError, SanitizerReport


def _triple(values: tuple[int, int, int] | None) -> str:
    return "(" + ",".join(str(v) for v in values) + ")" if values else "?"


def _where(error: SanitizerError, own_files: frozenset[str], verb: str = "launched") -> str:
    site = error.launch_site(own_files)
    return f", {verb} at {site.file}:{site.line}" if site else ""


MAX_FOREACH_KERNEL = ("mogg_for_each_", "mogg_foreach_")  # MAX's names for the kernels it makes of a foreach


def _kernel(error: SanitizerError) -> str:
    """The kernel as the user can find it: its name, its source line where the toolchain emits line info, and for a
    kernel MAX generated from a custom op's `foreach` (no line info, a name the user never wrote) what it is."""
    if not error.kernel:
        return "a kernel"
    named = f"kernel `{error.kernel}`"
    if error.source:
        return f"{named} ({error.source})"
    if error.kernel.startswith(MAX_FOREACH_KERNEL):
        return f"{named} (the kernel MAX made of a custom op's `foreach` closure)"
    return named


def describe(error: SanitizerError, own_files: frozenset[str] = frozenset(), op_of: OpOf | None = None) -> str:
    """One sentence: what this error says about the user's code. ``op_of`` names the custom op a kernel MAX made
    stands for (the op the program called at the launch site), where it can be told."""
    kernel = _kernel(error)
    op = op_of(error) if op_of is not None and error.kernel and error.kernel.startswith(MAX_FOREACH_KERNEL) else None
    if op:
        kernel = f"{kernel[:-1]}: {op})" if kernel.endswith(")") else f"{kernel} ({op})"
    if error.kind in (ErrorKind.OUT_OF_BOUNDS, ErrorKind.MISALIGNED):
        how = "out of bounds" if error.kind is ErrorKind.OUT_OF_BOUNDS else "at a misaligned address"
        verb = {"read": "reads", "write": "writes"}.get(error.access or "", "accesses")
        text = f"{kernel} {verb} {error.size_bytes} bytes of {error.space} memory {how}"
        text += f" (thread {_triple(error.thread)} of block {_triple(error.block)}"
        if error.distance_bytes is not None:
            text += (f", {error.distance_bytes:,} bytes {error.direction} the nearest allocation,"
                     f" which holds {error.allocation_bytes:,} bytes")  # fmt: skip
        return text + ")" + _where(error, own_files)
    if error.kind is ErrorKind.API_ERROR:
        text = f"the CUDA call {error.api_call} failed with {error.api_error} ({error.api_error_text})"
        native = next((f.function for f in error.host_frames if f.function and "(" in f.function), None)
        return text + (f" in {native.split('(')[0]}" if native else "") + _where(error, own_files)
    if error.kind is ErrorKind.DEVICE_ASSERT:
        return f"a device-side assert fired in thread {_triple(error.thread)} of block {_triple(error.block)}" + _where(
            error, own_files
        )
    if error.kind is ErrorKind.UNINITIALIZED and error.kernel is None and error.headline.startswith("Host API"):
        # initcheck on a copy to the host: what the program reads back holds elements no kernel wrote
        return f"a copy from the GPU reads memory no kernel wrote ({error.headline})" + _where(
            error, own_files, "called"
        )
    if error.kind is ErrorKind.UNINITIALIZED:
        return f"{kernel} reads memory nothing wrote ({error.headline})" + _where(error, own_files)
    if error.kind is ErrorKind.RACE and error.race:
        first, at, second, other = error.race
        count = f", {error.hazards:,} hazards" if error.hazards else ""
        return (f"{kernel} races on shared memory: a {first} at {at} and a {second} at {other} by different threads "
                f"with no barrier between them{count}") + _where(error, own_files)  # fmt: skip
    if error.kind is ErrorKind.SYNC:
        return f"{kernel} reaches a barrier not every thread of its block reaches ({error.headline})" + _where(
            error, own_files
        )
    return error.headline + _where(error, own_files)


OpOf = Callable[[SanitizerError], "str | None"]
# Farther from every allocation than any index can reach (an int32 index of 4-byte elements reaches 8 GiB): the pointer
# is not the allocation's at all — a host address (182,488,076,000 bytes away for a NumPy array's on the H100), or a
# freed or made-up one.
HOST_ADDRESS_BYTES = 1 << 33
_LAUNCH_CALLS = (
    "cudaLaunchKernel",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaLaunchKernelExC",
    "cuLaunchCooperativeKernel",
)


INT32_WRAP = 1 << 31  # a signed 32-bit index past this wraps negative
ELEMENT_SIZES = (1, 2, 4, 8, 16)


def wrapped_element_size(error: SanitizerError) -> int | None:
    """The element size of a signed 32-bit index that wrapped, where the access says so: an index i >= 2^31 into an
    allocation of more than 2^31 elements of s bytes becomes i - 2^32, so the access lands (2^32 - i)·s bytes before
    the allocation — between 2^32·s minus its size and 2^31·s. None where no element size fits."""
    distance, size = error.distance_bytes, error.allocation_bytes
    if error.kind is not ErrorKind.OUT_OF_BOUNDS or distance is None or not size or error.direction != "before":
        return None
    return next((s for s in ELEMENT_SIZES if size > INT32_WRAP * s and 2 * INT32_WRAP * s - size < distance
                 <= INT32_WRAP * s), None)  # fmt: skip


# describe()'s words for an access out of bounds, read back from a recorded line (a run recorded before a kind
# existed, a pasted report): the access size, the distance, its direction and the allocation's size.
_DESCRIBED = re.compile(r"(?:reads|writes|accesses) (\d+) bytes of \w+ memory out of bounds .*?([\d,]+) bytes "
                        r"(before|after) the nearest allocation, which holds ([\d,]+) bytes")  # fmt: skip


def overflow_in_line(line: str) -> dict[str, int] | None:
    """The wrapped index a described access out of bounds shows (element size, distance, allocation), or None."""
    match = _DESCRIBED.search(line)
    if match is None:
        return None
    error = SanitizerError(ErrorKind.OUT_OF_BOUNDS, line, size_bytes=int(match[1]), direction=match[3],
                           distance_bytes=int(match[2].replace(",", "")),
                           allocation_bytes=int(match[4].replace(",", "")))  # fmt: skip
    element = wrapped_element_size(error)
    if element is None or error.distance_bytes is None or error.allocation_bytes is None:
        return None
    return {"element_bytes": element, "distance_bytes": error.distance_bytes,
            "allocation_bytes": error.allocation_bytes}  # fmt: skip


# A launch the driver refused for want of code for this GPU is no configuration the program chose: its own kind.
_NO_BINARY_ERRORS = frozenset({"cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU",
                               "cudaErrorInvalidKernelImage", "CUDA_ERROR_INVALID_IMAGE"})  # fmt: skip


def cause_kind(error: SanitizerError) -> str:
    """The class of one error, as the knowledge tells them apart (each has its own fix)."""
    if wrapped_element_size(error) is not None:
        return "index-overflow"  # before the host-address test: a wrapped index of 8-byte elements reaches 16 GiB
    if error.kind is ErrorKind.OUT_OF_BOUNDS and (error.distance_bytes or 0) >= HOST_ADDRESS_BYTES:
        return "host-address"
    if error.kind is ErrorKind.API_ERROR and error.api_error in _NO_BINARY_ERRORS:
        return "no-binary"
    if error.kind is ErrorKind.API_ERROR and error.api_call in _LAUNCH_CALLS:
        return "launch-refused"
    return error.kind.value


def _cause(error: SanitizerError) -> tuple[object, ...]:
    """What makes two errors the same cause: the same kind of error of the same kernel, line and access, or the
    same call failing the same way (threads and addresses differ)."""
    return (error.kind, error.kernel, error.source, error.access, error.api_call, error.api_error)


def first_causes(report: SanitizerReport) -> list[SanitizerError]:
    """The errors worth naming: memory errors before the API errors they cause (a kernel that faults makes every
    later call fail with "unspecified launch failure"), one per kernel, line and kind, in order of appearance."""

    memory = [e for e in report.errors if e.kind is not ErrorKind.API_ERROR]
    calls = [e for e in report.errors if e.kind is ErrorKind.API_ERROR]
    if memory:  # the launch failures after a memory error are its echo
        calls = [e for e in calls if e.api_error not in ("cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED")]
    seen: dict[tuple[object, ...], SanitizerError] = {}
    for error in [*memory, *calls]:
        seen.setdefault(_cause(error), error)
    return list(seen.values())


def summarise(report: SanitizerReport, own_files: Iterable[str] = (), op_of: OpOf | None = None) -> list[str]:
    """One line per distinct cause, with how many times the sanitizer saw it."""
    return [cause["line"] for cause in causes(report, own_files, op_of)]


def causes(report: SanitizerReport, own_files: Iterable[str] = (), op_of: OpOf | None = None) -> list[dict[str, Any]]:
    """Each distinct cause as data: its kind (cause_kind), the failed call's error where it is one, and its line; the
    last one, where more were counted than printed, is the count (kind "count")."""
    own = frozenset(own_files)
    counts = Counter(_cause(e) for e in report.errors)
    found: list[dict[str, Any]] = []
    for error in first_causes(report):
        times = counts[_cause(error)]
        line = describe(error, own, op_of) + (
            f" — {times} of the {len(report.errors)} errors printed" if times > 1 else ""
        )
        cause: dict[str, Any] = {"kind": cause_kind(error), "api_error": error.api_error,
                                 "api_error_text": error.api_error_text, "line": line}  # fmt: skip
        if (element := wrapped_element_size(error)) is not None:
            cause.update(element_bytes=element, distance_bytes=error.distance_bytes,
                         allocation_bytes=error.allocation_bytes)  # fmt: skip
        found.append(cause)
    if report.error_count is not None and report.error_count > len(report.errors):
        found.append({"kind": "count", "line": f"{report.error_count:,} errors in all (the first "
                                               f"{len(report.errors)} printed)"})  # fmt: skip
    return found
