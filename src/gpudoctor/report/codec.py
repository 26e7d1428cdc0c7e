"""A report to and from JSON-shaped data, and its JSON schema: all three from one definition, the dataclasses in
``model`` (msgspec decodes into them, validating every field, and generates the schema).

msgspec is imported here only, when a report is encoded or decoded: the inventory-only run never pays for it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, NotRequired, Required, get_args, get_origin, get_type_hints, is_typeddict

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import SCHEMA_VERSION, Report

SCHEMA_FILE = Path(__file__).with_name("schema") / "report.schema.json"
SCHEMA_ID = "https://gpudoctor.dev/schema/report-1.json"


class ReportError(GpuDoctorError, ValueError):
    """A document that is not a report this gpudoctor reads; the message names the first field that is wrong."""


def encode(report: Report) -> dict[str, Any]:
    """The report as JSON-shaped data (what ``--json`` prints and the report id hashes): every declared field, in
    declaration order. The kernel section appears only in `gpudoctor kernel` reports (as it always has, so the
    ids of earlier reports stay what they were)."""
    data: dict[str, Any] = _builtins(report)
    if data.get("kernel") is None:
        data.pop("kernel", None)
    return data


def report_id(report: Report) -> str:
    """A content hash of the report: the same report read back from its JSON has the same id, so the matrix counts it
    once however often it is added."""
    canonical = json.dumps(encode(report), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _field(value: Any, digits: int | None) -> Any:
    """A field's value as encoded: floats the model marks with ``digits`` rounded to them (times to the millisecond,
    memory to a tenth of a MiB), as reports have always stored them; the object itself keeps full precision."""
    return round(value, digits) if digits is not None and isinstance(value, float) else _builtins(value)


def _builtins(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.metadata.get("name", f.name): _field(getattr(value, f.name), f.metadata.get("digits"))
            for f in dataclasses.fields(value)
            if not _left_out(value, f)
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {key: _builtins(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_builtins(item) for item in value]
    return value


def _left_out(value: Any, declared: dataclasses.Field[Any]) -> bool:
    """Whether a field is left out of the JSON: fields the model marks ``omit_empty`` appear only when they hold
    something, ``omit_none`` ones unless None (or unless their ``kept_with`` field is there), so that reports recorded
    before a field existed keep their bytes and ids."""
    held = getattr(value, declared.name)
    if declared.metadata.get("omit_empty"):
        return held in (None, ())
    if declared.metadata.get("omit_none") and held is None:
        partner = declared.metadata.get("kept_with")
        return partner is None or getattr(value, partner) is None
    return False


def decode(data: Any) -> Report:
    """A report from JSON-shaped data: every field checked for its type, unknown fields refused (a report is
    written by gpudoctor only; a field it does not know is a document of another kind or another version)."""
    import msgspec

    if not isinstance(data, dict):
        raise ReportError(f"a JSON {type(data).__name__}, not an object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise ReportError(f"field 'schema_version': {version!r}; this gpudoctor reads version {SCHEMA_VERSION}")
    unknown = _unknown_field(data, Report, "")
    if unknown is not None:
        raise ReportError(f"field {unknown!r}: unknown field")
    try:
        return msgspec.convert(_renamed(data, Report), Report, strict=True)
    except msgspec.ValidationError as error:
        raise ReportError(_one_line(str(error))) from None


def _one_line(message: str) -> str:
    """msgspec's "Expected `bool | null`, got `str` - at `$.findings[0].patch_verified`" as "field
    'findings[0].patch_verified': expected bool | null, got str" (and a missing field as "field 'x': missing")."""
    what, _, where = message.partition(" - at `")
    field = where.rstrip("`").removeprefix("$").removeprefix(".")
    if missing := re.fullmatch(r"Object missing required field `([^`]+)`", what):
        return f"field {'.'.join(filter(None, (field, missing[1])))!r}: missing"
    what = what.replace("`", "")
    what = what[:1].lower() + what[1:]
    return f"field {field!r}: {what}" if field else what


def _unknown_field(value: Any, kind: Any, path: str) -> str | None:
    """The path of the first key in ``value`` that ``kind`` (a dataclass, TypedDict, or a container of them) does
    not declare, or None. Free-form mappings (``details``, ``parameters``) are not looked into; the values of a
    mapping of a declared kind (``stack.libraries``) are."""
    origin = get_origin(kind)
    if origin in (typing.Union, UnionType):
        options = [option for option in get_args(kind) if option is not NoneType]
        return _unknown_field(value, options[0], path) if value is not None and len(options) == 1 else None
    if origin in (Required, NotRequired):
        return _unknown_field(value, get_args(kind)[0], path)
    if origin in (tuple, list) and isinstance(value, list):
        item = get_args(kind)[0]
        return next((found for i, v in enumerate(value) if (found := _unknown_field(v, item, f"{path}[{i}]"))), None)
    if origin in (Mapping, dict) and isinstance(value, dict):
        item = get_args(kind)[1]
        return next((found for k, v in value.items() if (found := _unknown_field(v, item, f"{path}.{k}"))), None)
    declared = _declared_fields(kind)
    if declared is None or not isinstance(value, dict):
        return None
    for key, item in value.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in declared:
            return where
        if (found := _unknown_field(item, declared[key], where)) is not None:
            return found
    return None


@functools.cache  # one resolution of the type hints per type, not one per object of a report
def _declared_fields(kind: Any) -> Mapping[str, Any] | None:
    """The fields of a dataclass or TypedDict by their JSON names, with their types; None for any other type."""
    if dataclasses.is_dataclass(kind) or is_typeddict(kind):
        hints = get_type_hints(kind, include_extras=True)
        return {_json_names(kind).get(name, name): hint for name, hint in hints.items()}
    return None


@functools.cache
def _json_names(kind: Any) -> Mapping[str, str]:
    """A dataclass's fields whose JSON key is no Python name (``from``), as field name -> JSON key."""
    if not (dataclasses.is_dataclass(kind) and isinstance(kind, type)):
        return {}
    return {f.name: f.metadata["name"] for f in dataclasses.fields(kind) if "name" in f.metadata}


@functools.cache
def _holds_json_names(kind: Any) -> bool:
    """Whether a value of ``kind`` can hold a dataclass with a renamed field (only those are walked by ``_renamed``)."""
    if _json_names(kind):
        return True
    declared = _declared_fields(kind)
    kinds = get_args(kind) if declared is None else tuple(declared.values())
    return any(_holds_json_names(k) for k in kinds)


def _renamed(value: Any, kind: Any) -> Any:
    """JSON-shaped data with the JSON keys of renamed fields turned into the field names msgspec converts to."""
    if not _holds_json_names(kind):
        return value
    origin = get_origin(kind)
    if origin in (typing.Union, UnionType, Required, NotRequired):
        options = [option for option in get_args(kind) if option is not NoneType]
        return _renamed(value, options[0]) if value is not None and len(options) == 1 else value
    if origin in (tuple, list) and isinstance(value, list):
        return [_renamed(item, get_args(kind)[0]) for item in value]
    if origin in (Mapping, dict) and isinstance(value, dict):
        return {key: _renamed(item, get_args(kind)[1]) for key, item in value.items()}
    declared = _declared_fields(kind)
    if declared is None or not isinstance(value, dict):
        return value
    names = {json_key: name for name, json_key in _json_names(kind).items()}
    return {names.get(key, key): _renamed(item, declared.get(key)) for key, item in value.items()}


def schema() -> dict[str, Any]:
    """The report's JSON schema, generated from the dataclasses; objects of gpudoctor's own shape refuse fields
    they do not declare, as ``decode`` does."""
    import msgspec

    generated = msgspec.json.schema(Report)
    definitions: dict[str, Any] = generated["$defs"]
    for definition in definitions.values():
        if definition.get("type") == "object" and "properties" in definition:
            definition["additionalProperties"] = False
    for kind in _renamed_kinds(Report):
        definition = definitions[kind.__name__]
        for name, json_key in _json_names(kind).items():
            definition["properties"][json_key] = definition["properties"].pop(name)
            definition["required"] = [json_key if r == name else r for r in definition.get("required", [])]
    report = definitions["Report"]
    report["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "gpudoctor report",
        "description": (
            "What `gpudoctor --json` prints. Generated from gpudoctor.model by `python -m gpudoctor.report.codec`."
        ),
        **generated,
    }


def _renamed_kinds(kind: Any) -> set[Any]:
    """The dataclasses within ``kind`` that have a renamed field."""
    if not _holds_json_names(kind):
        return set()
    declared = _declared_fields(kind)
    inner = get_args(kind) if declared is None else tuple(declared.values())
    own = {kind} if _json_names(kind) else set()
    return own.union(*(_renamed_kinds(k) for k in inner))


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m gpudoctor.report.codec: write the schema file from the dataclasses
    SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
