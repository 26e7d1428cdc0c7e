"""CuPy RawKernel launches checked against the kernel's C signature (``calls.signature``) before they proceed. CuPy
passes each argument as it is given: a device array as its pointer, a NumPy scalar with its own width, a Python int
as a 64-bit integer, a Python float as a double (cupy/cuda/function.pyx, ``_pointer``), and the driver copies as many
bytes as the kernel's parameter has from each. So a Python float for a ``float`` parameter arrives as the low half
of a double (wrong bits), a ``np.int32`` for a ``long long`` as four bytes and four more of whatever follows, an
array of float64 for a ``float*`` as twice as many floats of garbage; a NumPy array is host memory, which CuPy
refuses without naming the argument. Duck-typed: neither CuPy nor NumPy is imported here."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any

from gpudoctor.calls.check import Kind
from gpudoctor.calls.launch_mismatch import LaunchKind, LaunchMismatch
from gpudoctor.calls.launches import SMALLEST_ADDRESS, host_mapping
from gpudoctor.calls.signature import Parameter, Signature

_FIX_OF_DTYPE = {"float32": "cp.float32", "float64": "cp.float64", "float16": "cp.float16", "int32": "cp.int32",
                 "uint32": "cp.uint32", "int64": "cp.int64", "uint64": "cp.uint64", "int16": "cp.int16",
                 "uint16": "cp.uint16", "int8": "cp.int8", "uint8": "cp.uint8", "bool": "cp.bool_"}  # fmt: skip
_BYTE_POINTEES = frozenset({"void", "char", "signed char", "unsigned char", "int8_t", "uint8_t"})
_RANGES = {"int8": (-(2**7), 2**7), "uint8": (0, 2**8), "int16": (-(2**15), 2**15), "uint16": (0, 2**16),
           "int32": (-(2**31), 2**31), "uint32": (0, 2**32)}  # fmt: skip


_DTYPES: dict[Any, tuple[str, str, int]] = {}  # a dtype (NumPy's, torch's): its name, kind and size, read once


def _dtype(dtype: Any) -> tuple[str, str, int]:
    """(name, kind "f"/"i"/"u"/"b", bytes) of a dtype: NumPy's ``name`` costs microseconds, so each is read once."""
    found = _DTYPES.get(dtype)
    if found is None:
        name = str(getattr(dtype, "name", None) or dtype).rpartition(".")[2]  # torch.float32 -> float32
        found = _DTYPES[dtype] = (name, *_kind_and_size(name))
    return found


def _scalar(value: Any) -> tuple[str, int, str] | None:
    """A scalar argument as CuPy passes it: (kind "f"/"i"/"u"/"b", bytes, what it is); None for no scalar."""
    if isinstance(value, bool):
        return "b", 1, "a Python bool"
    if isinstance(value, int):
        return "i", 8, "a Python int (passed as a 64-bit integer)"
    if isinstance(value, float):
        return "f", 8, "a Python float (passed as a double)"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        name, kind, size = _dtype(dtype)
        return kind, size, f"np.{name}"
    return None


@functools.cache
def _kind_and_size(dtype: str) -> tuple[str, int]:
    kind = "f" if dtype.startswith(("float", "bfloat")) else "b" if dtype == "bool" else "u" if dtype[0] == "u" else "i"
    bits = "".join(c for c in dtype if c.isdigit())
    return kind, int(bits) // 8 if bits else 1


def _array_dtype(value: Any) -> str:
    return _dtype(getattr(value, "dtype", None))[0]


def _host_array(value: Any) -> str | None:
    """What ``value`` is when it is an array in host memory (NumPy's, a tensor on the CPU), else None."""
    cls = type(value)
    if cls.__module__ == "numpy" and cls.__name__ == "ndarray":
        return f"a NumPy array ({_array_dtype(value)}, host memory)"
    if hasattr(value, "data_ptr") and str(getattr(value, "device", "")) == "cpu":
        return f"a tensor on the CPU ({_array_dtype(value)})"
    return None


def _device_array(value: Any) -> bool:
    cls = type(value)
    if cls.__module__.startswith("cupy") and hasattr(value, "dtype"):
        return True
    with contextlib.suppress(Exception):  # torch raises for a CPU tensor's __cuda_array_interface__
        return getattr(value, "__cuda_array_interface__", None) is not None
    return False


def _mismatch(kernel: str, declared_at: str, site: str, parameter: Parameter, given: str, why: str, fix: str,
              kind: Kind, launch: LaunchKind) -> LaunchMismatch:  # fmt: skip
    sentence = (f"the launch of `{kernel}` at {site} passes {given} for `{parameter.written}` ({declared_at}): "
                f"{why}; pass `{fix}`")  # fmt: skip
    return LaunchMismatch(kind, kernel, declared_at, parameter.name, parameter.written, given, site, sentence, launch)


def _check_pointer(
    kernel: str, at: str, site: str, parameter: Parameter, value: Any, driver_knows: Callable[[int], bool | None],
    maps: Callable[[], str],
) -> LaunchMismatch | None:  # fmt: skip
    name = parameter.name
    host = _host_array(value)
    if host is not None:
        return _mismatch(kernel, at, site, parameter, host, "the kernel reads device memory, and this is host "
                         "memory (CuPy 14 refuses a NumPy array larger than one element: 'Only numpy.ndarrays of "
                         "size one can be passed by value', naming no parameter)",
                         f"cp.asarray({name})", Kind.HOST_POINTER, LaunchKind.CUPY_HOST_ARRAY)  # fmt: skip
    if isinstance(value, int) and not isinstance(value, bool) and value >= SMALLEST_ADDRESS:
        if driver_knows(value) is False and (mapping := host_mapping(value, maps())) is not None:
            return _mismatch(kernel, at, site, parameter, f"{value:#x}, a host address (in {mapping})",
                             "the driver's pointer attributes know no device memory there: the kernel faults at its "
                             "first access", "cp.asarray(host_array)", Kind.HOST_POINTER,
                             LaunchKind.CUPY_HOST_ARRAY)  # fmt: skip
        return None
    expected = parameter.dtype
    if parameter.depth != 1 or parameter.base in _BYTE_POINTEES or expected is None or not _device_array(value):
        return None
    given, given_kind, given_size = _dtype(getattr(value, "dtype", None))
    if given == expected:
        return None
    kind, size = _kind_and_size(expected)
    if given_size == size and {given_kind, kind} <= {"i", "u"}:  # the same bits, read with another sign: meant
        return None
    why = (f"the kernel reads its elements as {expected}, {size} bytes each, from {given_size}-byte {given} values: "
           "every element it reads is wrong")  # fmt: skip
    fix = f"{name}.astype({_FIX_OF_DTYPE.get(expected, expected)})"
    return _mismatch(kernel, at, site, parameter, f"an array of {given}", why, fix, Kind.DTYPE, LaunchKind.CUPY_DTYPE)


def _check_scalar(kernel: str, at: str, site: str, parameter: Parameter, value: Any) -> LaunchMismatch | None:
    scalar = _scalar(value)
    expected = parameter.dtype
    if scalar is None or expected is None:
        return None
    given_kind, given_size, given = scalar
    kind, size = _kind_and_size(expected)
    fix = f"{_FIX_OF_DTYPE.get(expected, expected)}({parameter.name})"
    if (given_kind == "f") != (kind == "f"):
        reads = "a float's bits as an integer" if kind != "f" else "an integer's bits as a float"
        return _mismatch(kernel, at, site, parameter, given, f"the kernel reads {reads}: a wrong value", fix,
                         Kind.DTYPE, LaunchKind.CUPY_SCALAR)  # fmt: skip
    if given_size == size:
        return None
    if kind == "f":
        why = (f"the kernel reads {size} of its {given_size} bytes as a {parameter.base}: "
               + ("the low half of a double, a wrong value" if given_size > size else "and bytes past it"))  # fmt: skip
        return _mismatch(kernel, at, site, parameter, given, why, fix, Kind.DTYPE, LaunchKind.CUPY_SCALAR)
    if given_size < size:
        why = f"the kernel reads {size} bytes from a {given_size}-byte value: the bytes past it are garbage"
        return _mismatch(kernel, at, site, parameter, given, why, fix, Kind.DTYPE, LaunchKind.CUPY_INT_WIDTH)
    low, high = _RANGES.get(expected, (None, None))
    number = int(value)
    if low is not None and high is not None and not low <= number < high:  # wider, and the value does not fit
        why = (f"the kernel reads the low {size} of its {given_size} bytes, and {number} does not fit in "
               f"`{parameter.base}`: it reads {_wrapped(number, expected)}")  # fmt: skip
        return _mismatch(kernel, at, site, parameter, given, why, fix, Kind.DTYPE, LaunchKind.CUPY_INT_WIDTH)
    return None  # wider, with a value that fits: the low bytes are the value (little-endian), as meant


def _wrapped(number: int, dtype: str) -> int:
    low, high = _RANGES[dtype]
    span = high - low
    return (number - low) % span + low


def check_cupy_launch(
    signature: Signature, args: Sequence[Any], site: str, declared_at: str,
    driver_knows: Callable[[int], bool | None], maps: Callable[[], str],
) -> LaunchMismatch | None:  # fmt: skip
    """The first argument of a launch (``args``, the tuple given to the kernel) that does not match its parameter in
    ``signature``; ``driver_knows`` and ``maps`` tell a host address from a device one (calls.launches)."""
    kernel = signature.kernel
    if len(args) != len(signature.parameters):
        sentence = (f"the launch of `{kernel}` at {site} passes {len(args)} arguments; `{signature.written}` "
                    f"({declared_at}) takes {len(signature.parameters)}: the driver reads each parameter from the "
                    "arguments in order, so a missing one is read from memory past them")  # fmt: skip
        return LaunchMismatch(Kind.COUNT, kernel, declared_at, None, signature.written, f"{len(args)} arguments",
                              site, sentence, LaunchKind.CUPY_COUNT)  # fmt: skip
    for parameter, value in zip(signature.parameters, args, strict=True):
        if value is None or not parameter.known:
            continue
        if parameter.depth:
            found = _check_pointer(kernel, declared_at, site, parameter, value, driver_knows, maps)
        else:
            found = _check_scalar(kernel, declared_at, site, parameter, value)
        if found is not None:
            return found
    return None
