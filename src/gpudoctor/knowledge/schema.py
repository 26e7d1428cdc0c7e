"""The shape of the knowledge files (and of the vocabulary, ``VocabularyShape``), as typed dataclasses, and the one
converter that checks a parsed TOML file against them (types, required and unknown fields) before ``knowledge.load``
(``knowledge.vocabulary``) checks what types cannot say.

Not msgspec, though it would do the same: the inventory-only run loads the knowledge for its pre-flight findings and
never imports msgspec (tests/test_codec.py); errors read as msgspec's do, and become one line the same way.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import typing
from dataclasses import dataclass, field
from types import NoneType, UnionType
from typing import Any, get_args, get_origin, get_type_hints

from gpudoctor.model import Outcome, Severity


class ValidationError(ValueError):
    """The first wrong field: msgspec's wording ("Expected `str`, got `int` - at `$.issue[0].id`")."""


@dataclass(frozen=True)
class BeforeShape:
    check: str
    id: str | None = None
    severity: Severity | None = None
    libraries: tuple[str, ...] = ()
    same_version: tuple[tuple[str, str], ...] = ()
    same_major: tuple[tuple[str, str], ...] = ()
    table: tuple[dict[str, str | list[str]], ...] = ()


@dataclass(frozen=True)
class EvidenceShape:
    probe: str
    outcome: Outcome
    signal: str | None = None
    pattern: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InRunShape:
    evidence: tuple[EvidenceShape, ...] = ()
    toolchain: str | None = None
    patterns: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    toolchains: tuple[str, ...] = ()
    implied: str | None = None
    unexplained: bool = False
    located: bool = False
    instead_of: tuple[str, ...] = ()
    stack_only: bool = False
    where_controls_pass: bool = False
    requester: bool = False


@dataclass(frozen=True)
class OverReportShape:
    predicates: tuple[str, ...]


@dataclass(frozen=True)
class VerdictShape:
    role: str | None = None
    consequences: tuple[str, ...] = ()
    stands_alone: bool = False


@dataclass(frozen=True)
class IssueShape:
    id: str
    title: str
    explanation: str
    fix: str
    severity: Severity = Severity.PROBLEM
    references: tuple[str, ...] = ()
    patch: str | None = None
    shown: str | None = None
    specific: bool = False
    affects: dict[str, str] = field(default_factory=dict)
    fixes: dict[str, str] = field(default_factory=dict)
    before: BeforeShape | None = None
    in_run: InRunShape | None = None
    over_report: OverReportShape | None = None
    verdict: VerdictShape | None = None


@dataclass(frozen=True)
class ToolchainShape:
    id: str
    name: str
    evidence: tuple[str, ...]
    probes_needing: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileShape:
    issue: tuple[IssueShape, ...] = ()
    toolchain: tuple[ToolchainShape, ...] = ()


@dataclass(frozen=True)
class PhaseShape:
    id: str
    means: str
    experiment: str
    experiment_in_run: str | None = None
    experiment_whole: str | None = None


@dataclass(frozen=True)
class ComponentShape:
    id: str
    name: str
    packages: tuple[str, ...] = ()
    compiles: str | None = None
    phase: str | None = None
    builds: bool = False
    reproducer: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class MarkShape:
    component: str
    kind: str
    pattern: str
    source: str
    text: str
    blames: str = "layer"
    phase: str | None = None
    means: str | None = None


@dataclass(frozen=True)
class WordShape:
    phase: str
    pattern: str
    source: str
    text: str


@dataclass(frozen=True)
class StatementShape:
    pattern: str
    source: str
    text: str


@dataclass(frozen=True)
class KindShape:
    id: str
    means: str
    experiment: str
    source: str
    text: str
    pattern: str | None = None
    phases: tuple[str, ...] = ()
    near_releases: bool = False
    experiment_in_run: str | None = None


@dataclass(frozen=True)
class VendorShape:
    id: str
    name: str
    pattern: str
    instead: str
    source: str
    text: str


@dataclass(frozen=True)
class VocabularyShape:
    phase: tuple[PhaseShape, ...] = ()
    component: tuple[ComponentShape, ...] = ()
    mark: tuple[MarkShape, ...] = ()
    word: tuple[WordShape, ...] = ()
    kind: tuple[KindShape, ...] = ()
    statement: tuple[StatementShape, ...] = ()
    vendor: tuple[VendorShape, ...] = ()
    held_whole: str | None = None
    held_line: str | None = None


def convert(data: dict[str, Any]) -> FileShape:
    """``data`` (a parsed TOML file) as a FileShape; a ValidationError names the first wrong field."""
    shape = _convert(data, FileShape, "$")
    assert isinstance(shape, FileShape)
    return shape


def convert_vocabulary(data: dict[str, Any]) -> VocabularyShape:
    """``data`` (the parsed vocabulary file) as a VocabularyShape; a ValidationError names the first wrong field."""
    shape = _convert(data, VocabularyShape, "$")
    assert isinstance(shape, VocabularyShape)
    return shape


def _kind_name(kind: Any) -> str:
    return {str: "str", bool: "bool", int: "int", dict: "object", list: "array", tuple: "array"}.get(kind, str(kind))


def _value_name(value: Any) -> str:
    return {str: "str", bool: "bool", int: "int", float: "float", dict: "object", list: "array"}.get(
        type(value), type(value).__name__
    )


def _wrong(path: str, what: str) -> ValidationError:
    return ValidationError(f"{what} - at `{path}`")


@functools.cache
def _fields(shape: type) -> dict[str, Any]:
    return get_type_hints(shape)


@functools.cache
def _parts(kind: Any) -> tuple[Any, tuple[Any, ...]]:
    return get_origin(kind), get_args(kind)


def _convert(value: Any, kind: Any, path: str) -> Any:
    if kind is str or kind is bool:  # most values: checked first, without looking the type apart
        if type(value) is not kind:
            raise _wrong(path, f"Expected `{_kind_name(kind)}`, got `{_value_name(value)}`")
        return value
    if kind is Any:
        return value
    origin, arguments = _parts(kind)
    if origin in (typing.Union, UnionType):
        options = [option for option in arguments if option is not NoneType]
        if value is None and len(options) < len(arguments):
            return None
        for option in options:
            try:
                return _convert(value, option, path)
            except ValidationError:
                if len(options) == 1:
                    raise
        names = " | ".join(_kind_name(get_origin(o) or o) for o in options)
        raise _wrong(path, f"Expected `{names}`, got `{_value_name(value)}`")
    if origin in (tuple, list, dict) and not isinstance(value, dict if origin is dict else list):
        raise _wrong(path, f"Expected `{_kind_name(origin)}`, got `{_value_name(value)}`")
    if origin is dict:
        return {key: _convert(item, arguments[1], f"{path}.{key}") for key, item in value.items()}
    if origin in (tuple, list):
        items = arguments
        if origin is tuple and items[-1] is not Ellipsis and len(value) != len(items):
            raise _wrong(path, f"Expected `array` of length {len(items)}, got {len(value)}")
        kinds = [items[0]] * len(value) if origin is list or items[-1] is Ellipsis else list(items)
        return origin(_convert(item, k, f"{path}[{n}]") for n, (item, k) in enumerate(zip(value, kinds, strict=True)))
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(value)
        except ValueError:
            raise _wrong(path, f"Invalid enum value {value!r}") from None
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise _wrong(path, f"Expected `object`, got `{_value_name(value)}`")
        declared = _fields(kind)  # type: ignore[arg-type]
        unknown = sorted(set(value) - set(declared))
        if unknown:
            raise _wrong(path, f"Object contains unknown field `{unknown[0]}`")
        required = [f.name for f in dataclasses.fields(kind) if f.default is f.default_factory is dataclasses.MISSING]
        missing = [name for name in required if name not in value]
        if missing:
            raise _wrong(path, f"Object missing required field `{missing[0]}`")
        made: Any = kind  # a dataclass type
        return made(**{name: _convert(item, declared[name], f"{path}.{name}") for name, item in value.items()})
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _wrong(path, f"Expected `{_kind_name(kind)}`, got `{_value_name(value)}`")
    return value
