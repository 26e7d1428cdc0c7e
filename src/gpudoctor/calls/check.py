"""One call of a custom op against its contract (``calls.contract``): the first way it does not match, as data with
one sentence, and what could not be checked. Pure and duck-typed — a tensor is anything with ``dtype``, ``shape``,
``device`` and ``data_ptr`` (and ``is_contiguous``, ``stride``, ``storage_offset`` for its layout) — so torch is never
imported here; it runs before every call, so the common case (a call that matches) does little more than read each
tensor's dtype, rank, device and contiguity once."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpudoctor.calls.contract import Contract
from gpudoctor.calls.layout import layout_of, what_max_does
from gpudoctor.calls.quick import TARGET_OF_DEVICE, Plan, dtype_name, extent, matches
from gpudoctor.kernel.scan import TensorArg


class Kind(enum.StrEnum):
    COUNT = "count"
    KEYWORD = "keyword"
    ORDER = "order"
    DTYPE = "dtype"
    RANK = "rank"
    DEVICES = "devices"
    TARGET = "target"
    ALIAS = "alias"
    PARAMETER = "parameter"
    SHAPE = "shape"
    HOST_POINTER = "host-pointer"  # a kernel launch given host memory (calls.launches)
    LAYOUT = "layout"  # a tensor that is not contiguous row-major storage (calls.layout)


@dataclass(frozen=True)
class Mismatch:
    """A call that does not match its op's declaration: what, where the op declares it, and where the call is."""

    kind: Kind
    op: str
    declared_at: str  # package/file:line
    argument: str | None
    declared: str
    given: str
    site: str  # the program's line: prog.py:23
    sentence: str

    def to_event(self) -> dict[str, str | None]:
        return {
            "kind": self.kind.value,
            "op": self.op,
            "declared_at": self.declared_at,
            "argument": self.argument,
            "declared": self.declared,
            "given": self.given,
            "site": self.site,
            "sentence": self.sentence,
        }


class CallMismatch(ValueError):
    """Raised before a call that does not match its op's declaration (``gpudoctor.calls.check``, or the hook with
    GPUDOCTOR_CALL_CHECKS=raise): the sentence, and the ``mismatch`` as data."""

    def __init__(self, mismatch: Mismatch) -> None:
        super().__init__(mismatch.sentence)
        self.mismatch = mismatch


class CallMismatchWarning(UserWarning):
    """Warned before a call that does not match its op's declaration (``on_mismatch="warn"``, or ``=warn``)."""


class CallNotCheckedWarning(UserWarning):
    """Warned once for what the checks could not check (no source, an argument that is not a tensor)."""


def _tensor_text(tensor: TensorArg) -> str:
    kind = " ".join(part for part in (tensor.dtype, f"rank {tensor.rank}" if tensor.rank is not None else None) if part)
    return f"`{tensor.name}` {kind}".rstrip()


def _given_text(value: Any) -> str:
    return f"{dtype_name(value.dtype)} {list(value.shape)}"


def _layout(contract: Contract) -> str:
    names = [f"output `{t.name}`" for t in contract.tensors if t.role == "output"]
    names += [f"input `{t.name}`" for t in contract.tensors if t.role == "input"]
    return ", then ".join(names)


def _mismatch(
    contract: Contract,
    kind: Kind,
    site: str,
    argument: str | None,
    declared: str,
    given: str,
    line: int | None = None,
    sentence: str | None = None,
) -> Mismatch:
    at = contract.at(line)
    text = sentence or f"{contract.op} ({at}) declares {declared}; the call at {site} passes {given}"
    return Mismatch(kind, contract.op, at, argument, declared, given, site, text)


def parameter_mismatch(contract: Contract, given: Mapping[str, Any] | None, site: str) -> Mismatch | None:
    """A compile-time parameter the call gives that the op does not declare (a misspelling, first: it explains a
    missing one), or one the op declares without a default that the call does not give."""
    given = given or {}
    declared = {p.name for p in contract.parameters}
    for name in given:
        if name not in declared:
            others = ", ".join(f"`{p}`" for p in contract.parameters) or "none"
            sentence = (f"{contract.op} ({contract.at()}) declares no compile-time parameter `{name}` (it declares "
                        f"{others}); the call at {site} gives `{name}`")  # fmt: skip
            return _mismatch(contract, Kind.PARAMETER, site, name, others, f"`{name}`", sentence=sentence)
    for parameter in contract.parameters:
        if parameter.required and parameter.name not in given:
            written = f'{contract.op}[{{"{parameter.name}": ...}}](...)'
            sentence = (f"{contract.op} ({contract.at()}) declares the compile-time parameter `{parameter}` without a "
                        f"default; the call at {site} gives none (give it: `{written}`)")  # fmt: skip
            return _mismatch(
                contract, Kind.PARAMETER, site, parameter.name, f"`{parameter}`", "none", sentence=sentence
            )
    return None


def _bind(contract: Contract, args: Sequence[Any], kwargs: Mapping[str, Any], site: str) -> list[Any] | Mismatch:
    """The arguments in declaration order, those given by name put in their places."""
    bound: list[Any] = list(args)
    names = [t.name for t in contract.tensors]
    for name, value in kwargs.items():
        if name not in names:
            return _mismatch(
                contract,
                Kind.KEYWORD,
                site,
                name,
                _layout(contract),
                f"`{name}=`",
                sentence=(
                    f"{contract.op} ({contract.at()}) declares no tensor `{name}` ({_layout(contract)}); the call at "
                    f"{site} passes `{name}=` by name"
                ),
            )
        position = names.index(name)
        while len(bound) <= position:
            bound.append(_MISSING)
        bound[position] = value
    return bound


_MISSING = object()


def _swapped(contract: Contract, args: Sequence[Any]) -> bool:
    """Whether the call matches every declared dtype and rank with its inputs first and its outputs after."""
    outputs = [t for t in contract.tensors if t.role == "output"]
    inputs = [t for t in contract.tensors if t.role == "input"]
    if not outputs or not inputs or len(args) != len(contract.tensors):
        return False
    for tensor, value in zip([*inputs, *outputs], args, strict=True):
        if not _is_tensor(value):
            return False
        if (tensor.dtype and dtype_name(value.dtype) != tensor.dtype) or (
            tensor.rank is not None and len(value.shape) != tensor.rank
        ):
            return False
    return True


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "device")


def check_call(
    contract: Contract, args: Sequence[Any], kwargs: Mapping[str, Any], site: Callable[[], str]
) -> tuple[Mismatch | None, list[str]]:
    """The first way the call does not match ``contract`` (None when it matches), and what could not be checked
    (arguments that are not tensors). ``site`` gives the program's line; it is asked only when there is something to
    say. (Inside a program, a call by position goes through ``matches`` first, with the op's Plan made once.)"""
    plan = Plan.of(contract)
    if not kwargs and plan is not None and matches(plan, args):
        return None, []
    return explain_call(contract, args, kwargs, site)


ArgumentText = Callable[[int, str], "str | None"]  # (position in the call, tensor name) -> the program's text of it


def explain_call(
    contract: Contract,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    site: Callable[[], str],
    argument_text: ArgumentText | None = None,
    memory: bool = True,
) -> tuple[Mismatch | None, list[str]]:
    """``check_call`` without the quick path: every argument read, to say what does not match and what could not be
    checked. ``argument_text`` gives the program's own text of an argument, for the fix a sentence gives; without
    ``memory`` (a graph's values, which have none) nothing is said of layouts and shared memory."""
    bound = _bind(contract, args, kwargs, site()) if kwargs else args
    if isinstance(bound, Mismatch):
        return bound, []
    tensors = contract.tensors
    if not contract.variadic and len(bound) != len(tensors):
        where = site()
        return _mismatch(
            contract,
            Kind.COUNT,
            where,
            None,
            f"{len(tensors)} tensors",
            f"{len(bound)}",
            sentence=(
                f"{contract.op} ({contract.at()}) declares {len(tensors)} tensors ({_layout(contract)}); the call at "
                f"{where} passes {len(bound)}"
            ),
        ), []
    unchecked: list[str] = []
    device = first = None
    for tensor, value in zip(tensors, bound, strict=False):
        if tensor.variadic:
            break  # what a variadic list holds, the scan cannot say
        if value is _MISSING or not _is_tensor(value):
            unchecked.append(
                f"{contract.op}: the call at {site()} passes `{tensor.name}` as a "
                f"{'nothing' if value is _MISSING else type(value).__name__}, not a tensor: not checked"
            )
            continue
        if (tensor.dtype is not None and dtype_name(value.dtype) != tensor.dtype) or (
            tensor.rank is not None and len(value.shape) != tensor.rank
        ):
            where = site()
            if _swapped(contract, bound):
                return _mismatch(
                    contract,
                    Kind.ORDER,
                    where,
                    tensor.name,
                    _layout(contract),
                    "inputs first",
                    sentence=f"{contract.op} ({contract.at()}) takes its outputs first "
                    f"({_layout(contract)}); the call at {where} passes its inputs first",
                ), unchecked
            kind = Kind.DTYPE if tensor.dtype is not None and dtype_name(value.dtype) != tensor.dtype else Kind.RANK
            return _mismatch(
                contract, kind, where, tensor.name, _tensor_text(tensor), _given_text(value), tensor.line
            ), unchecked
        if device is None:
            device, first = value.device, tensor.name
            target = TARGET_OF_DEVICE.get(device.type)
            if target not in contract.targets:
                where, runs = site(), " and ".join(contract.targets)
                return _mismatch(
                    contract,
                    Kind.TARGET,
                    where,
                    tensor.name,
                    runs,
                    str(device),
                    sentence=(
                        f"{contract.op} ({contract.at()}) runs on {runs} only; the call at {where} passes its tensors "
                        f"on {device}"
                    ),
                ), unchecked
        elif value.device != device:
            where = site()
            given = f"`{first}` on {device} and `{tensor.name}` on {value.device}"
            return _mismatch(
                contract,
                Kind.DEVICES,
                where,
                tensor.name,
                "every tensor on one device",
                given,
                sentence=(
                    f"{contract.op} ({contract.at()}) runs on one device, with every tensor on it; the call at {where} "
                    f"passes {given}"
                ),
            ), unchecked
    if unchecked or contract.variadic:
        return None, unchecked
    if not memory:
        return _relations(contract, bound, site, memory=False), unchecked
    return _layout_mismatch(contract, bound, site, argument_text) or _relations(contract, bound, site), unchecked


def _layout_mismatch(
    contract: Contract, bound: Sequence[Any], site: Callable[[], str], argument_text: ArgumentText | None
) -> Mismatch | None:
    """The first tensor that is not contiguous row-major storage (a transposed, sliced or expanded view): a Mojo op
    reads its tensors as such storage, whatever each MAX then does with the view (calls.layout)."""
    for position, (tensor, value) in enumerate(zip(contract.tensors, bound, strict=True)):
        layout = layout_of(value)
        if layout is None:
            continue
        where = site()
        text = argument_text(position, tensor.name) if argument_text is not None else None
        fix = f"`{text}.contiguous()`" if text else f"`{tensor.name}.contiguous()`, a contiguous copy"
        if tensor.role == "output":
            into = f"`{text}`" if text else "the view"
            fix = f"a contiguous tensor as the output and copy it into {into} after the call"
        given = f"`{tensor.name}` {layout.text()}"
        return _mismatch(
            contract,
            Kind.LAYOUT,
            where,
            tensor.name,
            "contiguous row-major storage",
            given,
            tensor.line,
            sentence=(
                f"{contract.op} ({contract.at(tensor.line)}) reads its tensors as contiguous row-major storage; the "
                f"call at {where} passes {given}{what_max_does(value.device.type, tensor.role)} — pass {fix}"
            ),
        )
    return None


def _relations(
    contract: Contract, bound: Sequence[Any], site: Callable[[], str], memory: bool = True
) -> Mismatch | None:
    """Outputs that share memory with an input, and inputs smaller than the output a foreach reads them with (sizes
    known: a graph's symbolic dims say nothing)."""
    by_name = {t.name: value for t, value in zip(contract.tensors, bound, strict=True)}
    outputs = [t.name for t in contract.tensors if t.role == "output"]
    inputs = [t.name for t in contract.tensors if t.role == "input"] if memory else []
    for output in outputs:
        start, end = extent(by_name[output])
        for name in inputs:
            other_start, other_end = extent(by_name[name])
            if start < other_end and other_start < end:
                where = site()
                given = f"`{output}` and `{name}` in the same memory"
                return _mismatch(contract, Kind.ALIAS, where, output, "outputs apart from inputs", given, sentence=(
                    f"{contract.op} ({contract.at()}) writes its output `{output}` while it reads its inputs; the "
                    f"call at {where} passes {given}: give the output a buffer of its own"))  # fmt: skip
    device = TARGET_OF_DEVICE.get(by_name[outputs[0]].device.type) if outputs else None
    for read in contract.same_index_reads:
        if read.only not in (None, device):
            continue
        output, given = by_name[read.output].shape, by_name[read.input].shape
        if not all(isinstance(size, int) for size in (*output, *given)):
            continue
        if len(output) == len(given) and any(o > g for o, g in zip(output, given, strict=True)):
            where = site()
            passes = f"`{read.output}` {list(output)} and `{read.input}` {list(given)}"
            return _mismatch(
                contract,
                Kind.SHAPE,
                where,
                read.input,
                f"`{read.input}` at least as large as `{read.output}`",
                passes,
                read.line,
                sentence=(
                    f"{contract.op} ({contract.at(read.line)}) runs its foreach over `{read.output}` and reads "
                    f"`{read.input}` at the same index, so `{read.input}` must be at least as large as "
                    f"`{read.output}`; the call at {where} passes {passes}"
                ),
            )
    return None
