"""What the launch checks of Triton and CuPy kernels find, as the custom-op checks' Mismatch (one sentence, said
through the same settings and side channel), with the launch's own kind in its event: the report tells a kernel
launch from a custom-op call by it (knowledge/checks/launch_arguments.py)."""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from types import FrameType

from gpudoctor.calls.check import Mismatch

_CALLS_FOLDER = __file__.rpartition("/")[0] + "/"


class LaunchKind(enum.StrEnum):
    TRITON_DEVICES = "triton-devices"  # tensors on another device than the launch's (another GPU, the CPU)
    CUPY_COUNT = "cupy-count"  # more or fewer arguments than the kernel's parameters
    CUPY_SCALAR = "cupy-scalar"  # a scalar of another kind than its parameter's (a Python float for `float`)
    CUPY_INT_WIDTH = "cupy-int-width"  # an integer of another width than its parameter's, where it changes the value
    CUPY_HOST_ARRAY = "cupy-host-array"  # host memory where the kernel reads device memory
    CUPY_DTYPE = "cupy-dtype"  # an array whose dtype is not its pointer's pointee


LAUNCH_KINDS = frozenset(kind.value for kind in LaunchKind)


@dataclass(frozen=True)
class LaunchMismatch(Mismatch):
    """A launch that does not match its kernel: ``kind`` is the nearest custom-op kind (devices, dtype, count, host
    pointer), ``launch`` the launch's own, which the event carries."""

    launch: LaunchKind = LaunchKind.TRITON_DEVICES

    def to_event(self) -> dict[str, str | None]:
        return {**super().to_event(), "kind": self.launch.value}


def program_frame(frame: FrameType | None, library_folder: str) -> FrameType | None:
    """The first frame outward of ``frame`` that is neither the library's (``library_folder``: Triton's autotuner and
    its launch proxy) nor gpudoctor's: the program's line that launched."""
    while frame is not None and (frame.f_code.co_filename.startswith((library_folder, _CALLS_FOLDER))
                                 or frame.f_code.co_filename == "<string>"):  # fmt: skip
        frame = frame.f_back
    return frame


def caller(depth: int) -> FrameType | None:
    """The frame ``depth`` levels above the caller of this function (sys._getframe, tolerated where absent)."""
    try:
        return sys._getframe(depth + 1)
    except ValueError:
        return None
