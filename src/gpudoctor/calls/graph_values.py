"""A MAX graph's tensor values and types (what ``ops.custom`` is given inside a ``graph_op``) as the call checks read a
tensor: dtype, shape and device, with no memory behind them. Duck-typed over MAX's ``TensorValue``/``TensorType``
(``dtype``, ``shape`` of dims, ``device`` with ``device_type`` and ``id``); MAX is never imported here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# MAX's device kinds as torch names them (the checks' device vocabulary)
_TORCH_TYPE_OF_KIND = {"cpu": "cpu", "gpu": "cuda"}


@dataclass(frozen=True)
class GraphDevice:
    """A graph value's device: ``type`` as torch says it (cpu, cuda), and MAX's own words for sentences."""

    type: str
    index: int
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class GraphTensor:
    """A graph value or type: ``shape`` holds ints for static dims and the dim's name for symbolic ones."""

    dtype: Any
    shape: tuple[int | str, ...]
    device: GraphDevice

    @property
    def static(self) -> bool:
        return all(isinstance(size, int) for size in self.shape)


def _dim(dim: Any) -> int | str:
    try:
        return int(dim)
    except (TypeError, ValueError):  # a symbolic dim ("batch") or an algebraic one
        return str(dim)


def graph_tensor(value: Any) -> GraphTensor | None:
    """``value`` (a TensorValue or a TensorType) as the checks read it; None for what is not a tensor (a buffer, an
    opaque value), which the caller says it could not check."""
    try:
        dtype, shape, device = value.dtype, value.shape, value.device
        kind = str(getattr(device.device_type, "value", device.device_type)).lower()
        index = int(getattr(device, "id", 0) or 0)
    except (AttributeError, TypeError, ValueError):
        return None
    torch_type = _TORCH_TYPE_OF_KIND.get(kind, kind)
    return GraphTensor(dtype, tuple(_dim(d) for d in shape), GraphDevice(torch_type, index, f"{torch_type}:{index}"))
