"""The `gpudoctor kernel` section of a report: the package checked, what the static scan read, the calls made and
the version-aware source check, as JSON-shaped types that mypy checks wherever they are read."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class KernelTensorArg(TypedDict):
    name: str
    role: str  # "output" or "input"
    dtype: str | None
    rank: int | None
    variadic: bool


class KernelSourceLine(TypedDict):
    file: str
    line: int
    text: str


class KernelOp(TypedDict):
    name: str
    struct: str | None
    file: str
    line: int
    tensors: list[KernelTensorArg]
    parameters: list[str]
    host_indexing: list[KernelSourceLine]


class KernelScan(TypedDict):
    is_package: bool
    files: list[str]
    ops: list[KernelOp]
    legacy_imports: list[KernelSourceLine]
    notes: list[str]


class KernelTensorSpec(TypedDict):
    shape: list[int]
    dtype: str


class KernelReference(TypedDict, total=False):
    expression: str
    file: str
    function: str


class KernelCallSpec(TypedDict):
    op: str
    outputs: list[KernelTensorSpec]
    inputs: list[KernelTensorSpec]
    parameters: dict[str, Any]
    values: str
    rtol: float | None
    atol: float | None
    reference: NotRequired[KernelReference | None]  # absent in reports before the reference existed


class SourceHitDict(TypedDict):
    rule: str
    file: str
    line: int
    text: str
    package: str
    accepted: str  # the releases of `package` that accept the construct (a specifier)
    accepted_here: bool | None  # by the installed release; None when the package is not installed
    rewrite: str


class SourceCheckDict(TypedDict):
    files: list[str]
    installed: dict[str, str | None]
    written_for: list[str]
    conflicts: int
    hits: list[SourceHitDict]


class KernelSection(TypedDict):
    package: str
    scan: KernelScan
    calls: list[KernelCallSpec]
    source: NotRequired[SourceCheckDict]  # the version-aware source check (absent in older reports)
