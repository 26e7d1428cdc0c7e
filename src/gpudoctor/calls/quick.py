"""The common case of a custom-op call check, read once per tensor: a call that matches its op's contract (dtype,
rank, one device the op runs on, contiguous storage, outputs apart from inputs, inputs as large as the output a
foreach reads them with). Anything else goes to the detailed path (``calls.check``), which says what and where."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudoctor.calls.contract import Contract

# torch's device types as MAX's targets; any other (meta, mps, xpu) is no target of a MAX custom op
TARGET_OF_DEVICE = {"cpu": "cpu", "cuda": "gpu"}
_DTYPE_NAMES: dict[Any, str] = {}  # torch.float32 -> "float32", as Mojo's DType spells it
_DEVICE_TARGETS: dict[Any, str] = {}  # torch.device("cuda:0") -> "gpu"; "" for no target of MAX's


def dtype_name(dtype: Any) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).rpartition(".")[2]
    return name


def extent(value: Any) -> tuple[int, int]:
    """The bytes a tensor can touch: [start, end)."""
    start, shape = value.data_ptr(), value.shape
    if not all(shape):
        return start, start
    reach = sum((size - 1) * stride for size, stride in zip(shape, value.stride(), strict=True)) + 1
    return start, start + reach * value.element_size()


@dataclass(frozen=True)
class Plan:
    """A contract as the common case checks it: each tensor's (dtype, rank), the output/input pairs, the same-index
    reads as (output, input, only) positions. None for an op with variadic tensors (the detailed path says why)."""

    tensors: tuple[tuple[str | None, int | None], ...]
    targets: frozenset[str]
    pairs: tuple[tuple[int, int], ...]
    reads: tuple[tuple[int, int, str | None], ...]

    @classmethod
    def of(cls, contract: Contract) -> Plan | None:
        if contract.variadic:
            return None
        names = [t.name for t in contract.tensors]
        outputs = [n for n, t in enumerate(contract.tensors) if t.role == "output"]
        inputs = [n for n, t in enumerate(contract.tensors) if t.role == "input"]
        reads = tuple((names.index(r.output), names.index(r.input), r.only) for r in contract.same_index_reads)
        return cls(tuple((t.dtype, t.rank) for t in contract.tensors), frozenset(contract.targets),
                   tuple((o, i) for o in outputs for i in inputs), reads)  # fmt: skip


def _span(value: Any) -> tuple[int, int]:
    start = value.data_ptr()
    if value.is_contiguous():
        return start, start + value.nbytes
    return extent(value)


def matches(plan: Plan, args: Sequence[Any]) -> bool:
    """Whether a call passed by position matches: the common case, read once per tensor and nothing more. False
    also for what only the detailed check can say (an argument that is not a tensor)."""
    if len(args) != len(plan.tensors):
        return False
    device = target = None
    shapes = []
    for (dtype, rank), value in zip(plan.tensors, args, strict=True):
        try:
            given, shape, where = value.dtype, value.shape, value.device
            if not value.is_contiguous():  # the detailed path says which view, and whether it matters
                return False
        except AttributeError:
            return False
        if (dtype is not None and (_DTYPE_NAMES.get(given) or dtype_name(given)) != dtype) or (
            rank is not None and len(shape) != rank
        ):
            return False
        if device is None:
            device, target = where, _DEVICE_TARGETS.get(where)
            if target is None:  # torch.device's .type costs more than the rest of the check: read once per device
                target = _DEVICE_TARGETS[where] = TARGET_OF_DEVICE.get(where.type, "")
            if target not in plan.targets:
                return False
        elif not where == device:  # noqa: SIM201 (torch.device's __ne__ is the slow one)
            return False
        shapes.append(shape)
    for output, input_ in plan.pairs:
        (start, end), (other_start, other_end) = _span(args[output]), _span(args[input_])
        if start < other_end and other_start < end:
            return False
    for output, input_, only in plan.reads:
        larger, smaller = shapes[output], shapes[input_]
        if only in (None, target) and len(larger) == len(smaller) and any(o > i for o, i in zip(larger, smaller)):  # noqa: B905
            return False
    return True
