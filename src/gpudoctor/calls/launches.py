"""cuda.core's ``launch`` checked before it proceeds: an argument that is an address must be memory the GPU can
reach. A host address handed to a kernel (a NumPy array's ``ctypes.data``, a buffer the copy to the device was
forgotten for) faults at the kernel's first access, and the error surfaces only at the next synchronisation, far from
the launch. The driver's pointer attributes tell it at the launch: an integer the driver knows no memory at
(CUDA_ERROR_INVALID_VALUE) that lies inside one of the process's own mappings is pageable host memory; a cuda.core
Buffer that is not device-accessible is host memory too. Integers outside every mapping (sizes, counts) are left
alone. Written for cuda.core 0.3-1.x and cuda-bindings 12-13; recorded on the H100 (tests/faulty_programs)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gpudoctor.calls.bridge import LAUNCHERS
from gpudoctor.calls.check import Kind, Mismatch

SMALLEST_ADDRESS = 1 << 16  # below this an integer is a size or a count: no process maps memory there
_PATCHED = "_gpudoctor_calls_patched"
Checked = Callable[[tuple[Any, ...], str], Mismatch | None]


def host_mapping(address: int, maps: str) -> str | None:
    """The mapping of this process's ``/proc/self/maps`` text that holds ``address`` ("[heap]", a file, "anonymous
    memory"), or None when none does."""
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        start, _, end = parts[0].partition("-")
        with contextlib.suppress(ValueError):
            if int(start, 16) <= address < int(end, 16):
                return parts[5].strip() if len(parts) == 6 and parts[5].strip() else "anonymous memory"
    return None


def _own_maps() -> str:
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            return maps.read()
    except OSError:
        return ""


def _driver_knows(address: int) -> bool | None:
    """Whether the CUDA driver knows memory at ``address`` (device, pinned, managed); None when it cannot be asked."""
    for name in ("cuda.bindings.driver", "cuda.cuda"):  # cuda-bindings; cuda-python before 12.6.1
        with contextlib.suppress(ImportError):
            driver = importlib.import_module(name)
            break
    else:
        return None
    error, _ = driver.cuPointerGetAttribute(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address)
    if error == driver.CUresult.CUDA_SUCCESS:
        return True
    return False if error == driver.CUresult.CUDA_ERROR_INVALID_VALUE else None


def _address(value: Any) -> int | None:
    """The address an argument passes, when it is an integer (Python's, NumPy's, a ctypes pointer)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    inner = getattr(value, "value", None)  # ctypes.c_void_p
    if type(value).__name__ == "c_void_p" and isinstance(inner, int):
        return inner
    if type(value).__module__ == "numpy" and type(value).__name__ in ("int64", "uint64", "intp", "uintp"):
        return int(value)
    return None


def check_launch(
    args: tuple[Any, ...], site: str, driver_knows: Callable[[int], bool | None] = _driver_knows,
    maps: Callable[[], str] = _own_maps,
) -> Mismatch | None:  # fmt: skip
    """The first argument of a launch (``args``: stream, config, kernel, then the kernel's) that passes host memory."""
    kernel = args[2] if len(args) > 2 else None
    name = getattr(kernel, "name", None) or "the kernel"
    for position, value in enumerate(args[3:], start=1):
        if getattr(value, "is_device_accessible", True) is False:
            given = f"a host Buffer ({getattr(value, 'size', '?')} bytes)"
            return _host(name, position, given, site)
        address = _address(value)
        if address is None or address < SMALLEST_ADDRESS or driver_knows(address) is not False:
            continue
        mapping = host_mapping(address, maps())
        if mapping is not None:
            return _host(name, position, f"{address:#x}, a host address (in {mapping})", site)
    return None


def _host(kernel: str, position: int, given: str, site: str) -> Mismatch:
    sentence = (f"the launch of {kernel} at {site} passes argument {position} = {given}: the driver's pointer "
                "attributes know no device memory there, so the kernel faults at its first access (reported at the "
                "next synchronisation); copy the data to the device (Device.allocate and copy_from, or a CuPy or "
                "torch array on cuda) and pass that")  # fmt: skip
    return Mismatch(Kind.HOST_POINTER, kernel, "cuda.core launch", f"argument {position}", "device memory", given,
                    site, sentence)  # fmt: skip


def wrap_launch(module: ModuleType, before: Callable[[tuple[Any, ...]], None]) -> None:
    """``module.launch`` calling ``before(args)`` first (the checks: calls.wrap)."""
    launch = getattr(module, "launch", None)
    if not callable(launch) or getattr(launch, _PATCHED, False):
        return

    @functools.wraps(launch)
    def checked_launch(*args: Any, **kwargs: Any) -> Any:
        before(args)
        return launch(*args, **kwargs)

    setattr(checked_launch, _PATCHED, True)
    module.launch = checked_launch  # type: ignore[attr-defined]
    for name in LAUNCHERS:  # cuda.core.experimental re-exports cuda.core's (and the other way round)
        other = sys.modules.get(name)
        if other is not None and getattr(other, "launch", None) is launch:
            other.launch = checked_launch  # type: ignore[attr-defined]
