"""A tensor's layout as a custom-op call passes it: whether it is contiguous row-major storage, what kind of view it is
(transposed, sliced, expanded), and what each MAX release does with one that is not, as recorded by the
layout-contract probe (matrix rows) — said in the call checks' sentence. Duck-typed and pure: no torch, no MAX."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# What MAX does with a view that is not contiguous row-major storage, per release line and device, as the
# layout-contract probe recorded it (matrix rows of 2026-11-27 on the CPU and on the H100: a custom op reads a
# transposed or sliced input and writes a transposed output as if contiguous, with no error).
# Each entry: (first release, last release or None, torch device type, role or "" for both, what it does). A release,
# device and role not here are not recorded yet: the sentence names the op's expectation alone there.
REFUSES_ON_CPU = 'refuses it on the CPU ("driver buffer\'s from_dlpack only accepts contiguous tensors")'
READS_AS_CONTIGUOUS_ON_CPU = "reads it as if contiguous on the CPU (wrong values, no error)"
WRITES_AS_CONTIGUOUS_ON_CPU = "writes it as if contiguous on the CPU (wrong values, no error)"
READS_AS_CONTIGUOUS_ON_CUDA = "reads it as if contiguous on CUDA (wrong values, no error)"
WRITES_AS_CONTIGUOUS_ON_CUDA = "writes it as if contiguous on CUDA (wrong values, no error)"
RECORDED: tuple[tuple[tuple[int, ...], tuple[int, ...] | None, str, str, str], ...] = (
    ((25, 4), (25, 4), "cpu", "input", READS_AS_CONTIGUOUS_ON_CPU),
    ((25, 4), (25, 4), "cpu", "output", WRITES_AS_CONTIGUOUS_ON_CPU),
    ((25, 5), None, "cpu", "", REFUSES_ON_CPU),
    ((26, 7), (26, 7), "cuda", "input", READS_AS_CONTIGUOUS_ON_CUDA),
    ((26, 7), (26, 7), "cuda", "output", WRITES_AS_CONTIGUOUS_ON_CUDA),
)


@dataclass(frozen=True)
class Layout:
    """A tensor that is not contiguous row-major storage: its shape, strides and storage offset, and what view it is."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    view: str  # "a transposed view", "a sliced view", "an expanded view"

    def text(self) -> str:
        at = f" from storage offset {self.offset}" if self.offset else ""
        return f"{list(self.shape)} with strides {self.strides}{at} ({self.view})"


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    # a dimension of size 1 (or an empty tensor) has no stride that matters: torch calls such tensors contiguous
    if not all(shape):
        return True
    return all(size == 1 or stride == want for size, stride, want in zip(shape, strides, contiguous_strides(shape)))  # noqa: B905


def _view(shape: Sequence[int], strides: Sequence[int]) -> str:
    if any(stride == 0 and size > 1 for size, stride in zip(shape, strides)):  # noqa: B905
        return "an expanded view"
    order = sorted(range(len(shape)), key=lambda n: -strides[n])
    permuted = [shape[n] for n in order]
    if [strides[n] for n in order] == list(contiguous_strides(permuted)) and order != sorted(order):
        return "a transposed view" if len(shape) == 2 else "a permuted view"
    return "a sliced view"


def layout_of(value: Any) -> Layout | None:
    """The layout of ``value`` when it is not contiguous row-major storage; None when it is, or when ``value`` does not
    say (no ``stride()``): a duck-typed tensor that cannot be read is no mismatch."""
    try:
        if value.is_contiguous():
            return None
        shape, strides = tuple(value.shape), tuple(value.stride())
        offset = int(value.storage_offset())
    except (AttributeError, TypeError, RuntimeError):  # not a strided tensor (a sparse one, a stand-in)
        return None
    if len(strides) != len(shape) or _is_contiguous(shape, strides):
        return None
    return Layout(tuple(int(s) for s in shape), tuple(int(s) for s in strides), offset, _view(shape, strides))


@functools.cache
def max_release() -> tuple[int, ...] | None:
    """The installed MAX's (major, minor), asked once and only when a sentence needs it."""
    try:
        from importlib import metadata

        text = metadata.version("max")
    except Exception:
        return None
    parts = []
    for part in text.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            return None
        parts.append(int(digits))
    return tuple(parts)


def recorded(release: tuple[int, ...] | None, device: str, role: str) -> str | None:
    """What MAX ``release`` was recorded to do on ``device`` (a torch device type) with a non-contiguous tensor passed
    as ``role`` (input or output)."""
    if release is None:
        return None
    for first, last, where, for_role, does in RECORDED:
        if where == device and for_role in ("", role) and release >= first and (last is None or release <= last):
            return does
    return None


def what_max_does(device: str, role: str, release: tuple[int, ...] | None = None) -> str:
    """The clause of the sentence that says what this MAX does, on the call's device and, from the CPU, on CUDA too
    (a test passing on the CPU because MAX refuses there says nothing of the GPU): empty when nothing is recorded."""
    release = release if release is not None else max_release()
    name = "MAX" if release is None else "MAX " + ".".join(str(p) for p in release)
    here = recorded(release, device, role)
    said = [d for d in (here, recorded(release, "cuda", role) if device == "cpu" else None) if d]
    return f": {name} {' and '.join(said)}" if said else ""
