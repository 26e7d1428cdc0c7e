"""A report to and from JSON-shaped data, and its JSON schema: all three from one definition, the dataclasses in
``model`` (msgspec decodes into them, validating every field, and generates the schema).

msgspec is imported here only, when a report is encoded or decoded: the inventory-only run never pays for it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
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


def _field(value: Any, digits: int | None) -> Any:
    """A field's value as encoded: floats the model marks with ``digits`` rounded to them (times to the millisecond,
    memory to a tenth of a MiB), as reports have always stored them; the object itself keeps full precision."""
    return round(value, digits) if digits is not None and isinstance(value, float) else _builtins(value)


def _builtins(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # fields the model marks omit_empty appear only when they hold something: reports recorded before them
        # keep their ids
        return {
            f.name: _field(getattr(value, f.name), f.metadata.get("digits"))
            for f in dataclasses.fields(value)
            if not (f.metadata.get("omit_empty") and getattr(value, f.name) in (None, ()))
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {key: _builtins(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_builtins(item) for item in value]
    return value


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
        return msgspec.convert(data, Report, strict=True)
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
    not declare, or None. Free-form mappings (``details``, ``stack``, ``parameters``) are not looked into."""
    origin = get_origin(kind)
    if origin in (typing.Union, UnionType):
        options = [option for option in get_args(kind) if option is not NoneType]
        return _unknown_field(value, options[0], path) if value is not None and len(options) == 1 else None
    if origin in (Required, NotRequired):
        return _unknown_field(value, get_args(kind)[0], path)
    if origin in (tuple, list) and isinstance(value, list):
        item = get_args(kind)[0]
        return next((found for i, v in enumerate(value) if (found := _unknown_field(v, item, f"{path}[{i}]"))), None)
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
    if dataclasses.is_dataclass(kind) or is_typeddict(kind):
        return get_type_hints(kind, include_extras=True)
    return None


def schema() -> dict[str, Any]:
    """The report's JSON schema, generated from the dataclasses; objects of gpudoctor's own shape refuse fields
    they do not declare, as ``decode`` does."""
    import msgspec

    generated = msgspec.json.schema(Report)
    definitions: dict[str, Any] = generated["$defs"]
    for definition in definitions.values():
        if definition.get("type") == "object" and "properties" in definition:
            definition["additionalProperties"] = False
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


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m gpudoctor.report.codec: write the schema file from the dataclasses
    SCHEMA_FILE.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
