"""Which ops of a user's kernel package to call, with which tensors: from a small TOML file or from options,
completed from what the static scan read in each ``execute`` signature.

A spec file looks like::

    [[call]]
    op = "add_one"            # the name given to @register
    shape = [64, 64]          # used for every tensor the call does not list itself
    dtype = "float32"         # used where the signature leaves the dtype open (default float32)
    parameters = { factor = 3 }   # compile-time parameters: library.op[{...}]
    values = "arange"         # input values: arange (default), ones or random (seeded)
    rtol = 1e-5               # tolerance of every comparison (defaults depend on the dtype)
    atol = 1e-6
    reference = "x0 + 1"      # what the outputs should be: a Python expression over torch, x0, x1, ... (the
                              # inputs, on the CPU), inputs and parameters; or "file.py:function", called as
                              # function(*inputs, **parameters) (the file relative to this spec). One tensor, or a
                              # tuple with one per output. Each device is judged against it.
    # outputs = [{ shape = [64, 64], dtype = "float32" }]   # optional, in signature order
    # inputs = [{ shape = [64, 64] }]
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpuDoctorError
from gpudoctor.kernel.scan import OpInfo, PackageScan
from gpudoctor.kernelsection import KernelCallSpec, KernelReference, KernelTensorSpec
from gpudoctor.tomlcheck import checked_table, read_toml

DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool")
VALUES = ("arange", "ones", "random")
MAX_ELEMENTS = 1 << 26  # per tensor; a diagnosis needs small tensors, not a benchmark
MAX_CALLS = 64
MAX_SPEC_BYTES = 256 * 1024
_CALL_FIELDS = {"op", "shape", "dtype", "parameters", "values", "rtol", "atol", "outputs", "inputs", "reference"}
MAX_REFERENCE_CHARS = 4000
_REFERENCE_FUNCTION = re.compile(r"^(?P<file>[^\s:]+\.py):(?P<function>[A-Za-z_]\w*)$")
_TENSOR_FIELDS = {"shape", "dtype"}
_OP_NAME = re.compile(r"^[A-Za-z_][\w.]*$")

ParameterValue = bool | int | float | str


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str

    def to_dict(self) -> KernelTensorSpec:
        return {"shape": list(self.shape), "dtype": self.dtype}

    def describe(self) -> str:
        return f"{self.dtype}[{'x'.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class Reference:
    """What a call's outputs should be: a Python expression, or a function in a file (an absolute path)."""

    expression: str | None = None
    file: str | None = None
    function: str | None = None

    def to_dict(self) -> KernelReference:
        if self.expression is not None:
            return {"expression": self.expression}
        return {"file": self.file or "", "function": self.function or ""}

    def describe(self) -> str:
        return self.expression if self.expression is not None else f"{Path(self.file or '').name}:{self.function}"


def parse_reference(where: str, text: Any, base: Path | None = None) -> Reference:
    """A reference as written (``"x0 + 1"`` or ``"ref.py:add_one"``, the file relative to ``base``); a usage
    error when it is not a string, too long, not valid Python or names a file that is not there."""
    if not isinstance(text, str) or not text.strip():
        raise GpuDoctorError(f"{where}: a reference is a Python expression or file.py:function, as a string")
    text = text.strip()
    if len(text) > MAX_REFERENCE_CHARS:
        raise GpuDoctorError(
            f"{where}: the reference is longer than {MAX_REFERENCE_CHARS} characters; use file.py:function"
        )
    named = _REFERENCE_FUNCTION.match(text)
    if named:
        path = Path(named["file"])
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        if not path.is_file():
            raise GpuDoctorError(f"{where}: reference file {named['file']!r} not found (looked at {path})")
        return Reference(file=str(path.absolute()), function=named["function"])
    try:
        compile(text, "<reference>", "eval")
    except SyntaxError as error:
        raise GpuDoctorError(f"{where}: the reference is not a Python expression: {error.msg} ({text!r})") from None
    return Reference(expression=text)


@dataclass(frozen=True)
class KernelCall:
    """One call ``library.op[parameters](*outputs, *inputs)``, fully specified."""

    op: str
    outputs: tuple[TensorSpec, ...]
    inputs: tuple[TensorSpec, ...]
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)
    values: str = "arange"
    rtol: float | None = None
    atol: float | None = None
    reference: Reference | None = None

    def to_dict(self) -> KernelCallSpec:
        return {
            "reference": self.reference.to_dict() if self.reference else None,
            "op": self.op,
            "outputs": [t.to_dict() for t in self.outputs],
            "inputs": [t.to_dict() for t in self.inputs],
            "parameters": dict(self.parameters),
            "values": self.values,
            "rtol": self.rtol,
            "atol": self.atol,
        }

    def describe(self) -> str:
        params = f"[{', '.join(f'{k}={v!r}' for k, v in self.parameters.items())}]" if self.parameters else ""
        outs = ", ".join(t.describe() for t in self.outputs)
        ins = ", ".join(t.describe() for t in self.inputs)
        return f"{self.op}{params}(out: {outs}; in: {ins})"


TensorRequest = tuple[tuple[int, ...] | None, str | None]  # (shape, dtype), either left open


@dataclass(frozen=True)
class CallRequest:
    """A call as the user wrote it, before the scan fills in what it left out."""

    op: str
    where: str  # "--op" or "spec.toml: call[0]", for error messages
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    parameters: Mapping[str, ParameterValue] = field(default_factory=dict)
    values: str = "arange"
    rtol: float | None = None
    atol: float | None = None
    outputs: tuple[TensorRequest, ...] | None = None
    inputs: tuple[TensorRequest, ...] | None = None
    reference: Reference | None = None
    # --param given once for several --op: each op gets only the parameters its signature declares
    # (a parameter no scanned op declares still goes to every op, so MAX's own error shows).
    shared_parameters: bool = False


def parse_shape(text: str) -> tuple[int, ...]:
    """``"3x4"`` or ``"3,4"`` -> (3, 4); a usage error for anything else."""
    parts = [p for p in re.split(r"[x,\s]+", text.strip()) if p]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise GpuDoctorError(f"--shape {text!r}: not a shape", hint="write it like 64x64") from None
    _check_shape(f"--shape {text!r}", shape)
    return shape


def _check_shape(where: str, shape: Sequence[Any]) -> tuple[int, ...]:
    if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
        raise GpuDoctorError(f"{where}: a shape is a non-empty list of positive whole numbers, got {list(shape)!r}")
    if len(shape) > 8 or math.prod(shape) > MAX_ELEMENTS:
        raise GpuDoctorError(
            f"{where}: shape {list(shape)} is too large for a diagnosis (at most {MAX_ELEMENTS} elements)"
        )
    return tuple(shape)


def _check_dtype(where: str, dtype: Any) -> str:
    if dtype not in DTYPES:
        raise GpuDoctorError(f"{where}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    return str(dtype)


def parse_parameter(text: str) -> tuple[str, ParameterValue]:
    """``name=value`` with value read as bool, int, float or else a string."""
    name, sep, raw = text.partition("=")
    if not sep or not _OP_NAME.match(name.strip()):
        raise GpuDoctorError(f"--param {text!r}: write it as name=value")
    value: ParameterValue
    if raw.lower() in ("true", "false"):
        value = raw.lower() == "true"
    else:
        try:
            value = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                value = raw
    return name.strip(), value


def _check_parameters(where: str, parameters: Any) -> dict[str, ParameterValue]:
    if not isinstance(parameters, dict):
        raise GpuDoctorError(f"{where}: field 'parameters' must be a table")
    for key, value in parameters.items():
        if not isinstance(value, (bool, int, float, str)):
            raise GpuDoctorError(f"{where}: parameter {key!r} must be a bool, number or string")
    return dict(parameters)


def _tolerance(where: str, entry: Mapping[str, Any], key: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or math.isnan(value):
        raise GpuDoctorError(f"{where}: field {key!r} must be a non-negative number")
    return float(value)


def _tensor_list(where: str, value: Any) -> tuple[TensorRequest, ...]:
    if not isinstance(value, list):
        raise GpuDoctorError(f'{where} must be a list of tables like {{ shape = [4, 4], dtype = "float32" }}')
    tensors = []
    for i, item in enumerate(value):
        here = f"{where}[{i}]"
        item = checked_table(here, item, _TENSOR_FIELDS)
        shape = _check_shape(f"{here}: field 'shape'", item["shape"]) if "shape" in item else None
        dtype = _check_dtype(f"{here}: field 'dtype'", item["dtype"]) if "dtype" in item else None
        tensors.append((shape, dtype))
    return tuple(tensors)


def load_spec(path: Path) -> list[CallRequest]:
    """The calls in a spec file; a malformed file is an error naming the file, the call and the field."""
    data = read_toml(path, MAX_SPEC_BYTES)
    unknown = set(data) - {"call"}
    if unknown:
        raise GpuDoctorError(f"{path}: unknown top-level key {sorted(unknown)[0]!r} (a spec holds [[call]] tables)")
    calls = data.get("call")
    if not isinstance(calls, list) or not calls:
        raise GpuDoctorError(f"{path}: no [[call]] table", hint="see `gpudoctor kernel --help` for the format")
    if len(calls) > MAX_CALLS:
        raise GpuDoctorError(f"{path}: {len(calls)} calls; at most {MAX_CALLS}")
    requests = []
    for index, raw in enumerate(calls):
        where = f"{path}: call[{index}]"
        entry = checked_table(where, raw, _CALL_FIELDS)
        op = entry.get("op")
        if not isinstance(op, str) or not _OP_NAME.match(op):
            raise GpuDoctorError(f"{where}: field 'op' must be the name an op is registered under")
        values = entry.get("values", "arange")
        if values not in VALUES:
            raise GpuDoctorError(f"{where}: field 'values' must be one of {', '.join(VALUES)}")
        requests.append(
            CallRequest(
                op=op,
                where=where,
                shape=_check_shape(f"{where}: field 'shape'", entry["shape"]) if "shape" in entry else None,
                dtype=_check_dtype(f"{where}: field 'dtype'", entry["dtype"]) if "dtype" in entry else None,
                parameters=_check_parameters(where, entry.get("parameters", {})),
                values=values,
                rtol=_tolerance(where, entry, "rtol"),
                atol=_tolerance(where, entry, "atol"),
                outputs=_tensor_list(f"{where}: field 'outputs'", entry["outputs"]) if "outputs" in entry else None,
                inputs=_tensor_list(f"{where}: field 'inputs'", entry["inputs"]) if "inputs" in entry else None,
                reference=(
                    parse_reference(f"{where}: field 'reference'", entry["reference"], path.parent)
                    if "reference" in entry
                    else None
                ),
            )
        )
    return requests


def _resolve_tensors(
    request: CallRequest, role: str, given: Sequence[TensorRequest] | None, op: OpInfo | None
) -> tuple[TensorSpec, ...]:
    declared = (op.outputs if role == "output" else op.inputs) if op else None
    if given is None:
        if declared is None:
            raise GpuDoctorError(
                f"{request.where}: op {request.op!r} was not found by the scan, so say its tensors",
                hint=f'list them in a spec file: {role}s = [{{ shape = [4, 4], dtype = "float32" }}]',
            )
        if any(t.variadic for t in declared):
            raise GpuDoctorError(f"{request.where}: op {request.op!r} takes variadic {role}s; list them in a spec file")
        given = [(None, None)] * len(declared)
    elif declared is not None and len(given) != len(declared) and not any(t.variadic for t in declared):
        raise GpuDoctorError(
            f"{request.where}: op {request.op!r} takes {len(declared)} {role}(s) in its execute signature, "
            f"the spec lists {len(given)}"
        )
    tensors = []
    for index, (shape, dtype) in enumerate(given):
        arg = declared[index] if declared is not None and index < len(declared) else None
        name = arg.name if arg else f"{role}[{index}]"
        shape = shape or request.shape
        if shape is None:
            raise GpuDoctorError(f"{request.where}: no shape for {role} {name!r}", hint="give --shape or 'shape'")
        if arg and arg.rank is not None and len(shape) != arg.rank:
            raise GpuDoctorError(
                f"{request.where}: {role} {name!r} is rank {arg.rank} in the signature, the shape "
                f"{list(shape)} is rank {len(shape)}",
                hint="give each tensor its own shape in a spec file",
            )
        if arg and arg.dtype is not None:
            if dtype is not None and dtype != arg.dtype:
                raise GpuDoctorError(
                    f"{request.where}: {role} {name!r} is {arg.dtype} in the signature, the spec says {dtype}"
                )
            dtype = arg.dtype if arg.dtype in DTYPES else dtype
        dtype = dtype or request.dtype or "float32"
        tensors.append(TensorSpec(shape, _check_dtype(f"{request.where}: {role} {name!r}", dtype)))
    return tuple(tensors)


def _declared_parameter_names(op: OpInfo) -> set[str]:
    return {p.split(":")[0].split("=")[0].strip() for p in op.parameters}


def _parameters_for(request: CallRequest, op: OpInfo | None, scan: PackageScan) -> dict[str, ParameterValue]:
    if not request.shared_parameters or op is None:
        return dict(request.parameters)
    declared_anywhere = set().union(*(_declared_parameter_names(o) for o in scan.ops))
    mine = _declared_parameter_names(op)
    return {k: v for k, v in request.parameters.items() if k in mine or k not in declared_anywhere}


def resolve_calls(requests: Sequence[CallRequest], scan: PackageScan) -> tuple[KernelCall, ...]:
    """Complete each request from the scanned signatures; an unknown op or a clash is a usage error."""
    calls = []
    for request in requests:
        op = scan.op(request.op)
        if op is None and scan.ops and (request.outputs is None or request.inputs is None):
            raise GpuDoctorError(
                f"{request.where}: no op {request.op!r} in the package",
                hint="ops found: " + ", ".join(o.name for o in scan.ops),
            )
        calls.append(
            KernelCall(
                op=request.op,
                outputs=_resolve_tensors(request, "output", request.outputs, op),
                inputs=_resolve_tensors(request, "input", request.inputs, op),
                parameters=_parameters_for(request, op, scan),
                values=request.values,
                rtol=request.rtol,
                atol=request.atol,
                reference=request.reference,
            )
        )
    return tuple(calls)
