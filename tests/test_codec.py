"""One definition of a report's shape (the dataclasses in gpudoctor.model): decoding validates every field, encoding
keeps report ids stable, and the JSON schema file is the one generated from the dataclasses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SCHEMA, TESTS, run_cli, validate_report

from gpudoctor.report.codec import ReportError, decode, encode, report_id, schema_text

FIXTURES = TESTS / "fixtures"
RECORDED = sorted(p for p in FIXTURES.rglob("*.json") if "schema_version" in json.loads(p.read_text()))
IDS = json.loads((FIXTURES / "report-ids.json").read_text())["ids"]


def _fixture(name: str = "h100-kernel-host-indexing.json") -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return document


def test_every_recorded_report_round_trips_unchanged_with_the_id_it_always_had() -> None:
    assert len(RECORDED) == len(IDS) >= 50
    for path in RECORDED:
        document = json.loads(path.read_text())
        report = decode(document)
        assert _written_back(document, encode(report)), path  # every field as it was written (newer ones added)
        assert decode(encode(report)) == report, path
        assert report_id(report) == IDS[str(path.relative_to(FIXTURES))], path
        validate_report(document)


def _written_back(written: Any, encoded: Any) -> bool:
    """Whether ``encoded`` holds every field of ``written`` with its value (a report recorded before a field
    existed gets the field's default)."""
    if isinstance(written, dict):
        same = [k in encoded and _written_back(v, encoded[k]) for k, v in written.items()]
        return isinstance(encoded, dict) and all(same)
    if isinstance(written, list):
        return isinstance(encoded, list) and len(written) == len(encoded) and all(map(_written_back, written, encoded))
    return bool(written == encoded)


def test_the_schema_file_is_the_one_generated_from_the_dataclasses() -> None:
    assert SCHEMA.read_text() == schema_text(), "stale: run python -m gpudoctor.report.codec"
    schema = json.loads(SCHEMA.read_text())
    assert schema["$defs"]["Report"]["additionalProperties"] is False
    assert sorted(schema["$defs"]["Outcome"]["enum"]) == ["crash", "fail", "interrupted", "pass", "skipped", "timeout"]


def _with(document: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """``document`` with the field at ``dotted`` (keys and list indexes, dot-separated) set to ``value``."""
    copy = json.loads(json.dumps(document))
    *parents, last = dotted.split(".")
    target: Any = copy
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[last] = value
    return copy


@pytest.mark.parametrize(
    ("dotted", "value", "message"),
    [
        ("findings.0.patch_verified", "yes", "field 'findings[0].patch_verified': expected bool | null, got str"),
        ("kernel.scan", 3, "field 'kernel.scan': expected object, got int"),
        ("kernel.scan.ops.0.host_indexing.0.line", "18", "field 'kernel.scan.ops[0].host_indexing[0].line': expected"),
        ("results.1.outcome", "exploded", "field 'results[1].outcome': invalid enum value 'exploded'"),
        ("results.0.duration_s", None, "field 'results[0].duration_s': expected float, got null"),
        ("environment.driver.gpus", {"index": 0}, "field 'environment.driver.gpus': expected array, got object"),
        ("colour", "red", "field 'colour': unknown field"),
        ("results.2.colour", "red", "field 'results[2].colour': unknown field"),
        ("environment.platform.hostname", "box", "field 'environment.platform.hostname': unknown field"),
        ("kernel.calls.0.shell", "rm -rf /", "field 'kernel.calls[0].shell': unknown field"),
        ("schema_version", 2, "field 'schema_version': 2; this gpudoctor reads version 1"),
        ("schema_version", True, "field 'schema_version': True; this gpudoctor reads version 1"),
    ],
)
def test_a_malformed_report_is_refused_with_one_line_naming_the_field(dotted: str, value: Any, message: str) -> None:
    with pytest.raises(ReportError) as caught:
        decode(_with(_fixture(), dotted, value))
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_free_form_fields_stay_free_and_a_missing_field_is_named() -> None:
    document = _with(_fixture(), "results.0.details", {"anything": [1, {"nested": None}]})
    assert decode(document).results[0].details == {"anything": [1, {"nested": None}]}
    del document["results"][0]["outcome"]
    with pytest.raises(ReportError, match=r"^field 'results\[0\]\.outcome': missing$"):
        decode(document)
    document = _fixture()
    del document["environment"]
    with pytest.raises(ReportError, match=r"^field 'environment': missing$"):
        decode(document)
    with pytest.raises(ReportError, match="a JSON list, not an object"):
        decode([])


def test_the_cli_refuses_a_malformed_report_with_exit_2_and_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "report.json"
    bad.write_text(json.dumps(_with(_fixture(), "findings.0.patch_verified", "yes")))
    completed = run_cli("matrix", "add", "--matrix", str(tmp_path / "matrix"), "--from", str(bad))
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        f"gpudoctor: error: {bad}: not a gpudoctor --json report (field 'findings[0].patch_verified': "
        "expected bool | null, got str)"
    ]
    assert not (tmp_path / "matrix").exists() or not any((tmp_path / "matrix").rglob("*.toml"))


def test_a_report_read_back_renders_as_the_original_and_the_inventory_run_never_imports_msgspec() -> None:
    from gpudoctor.report.text import to_text

    report = decode(_fixture())
    assert to_text(decode(encode(report))) == to_text(report)
    code = (
        "import sys, io, contextlib\n"
        "from gpudoctor.program import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['--no-probes', '--json'])\n"
        "print(code, 'msgspec' in sys.modules)\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert completed.stdout.split() == ["0", "False"], completed.stderr[-2000:]


def test_the_stack_facts_are_typed_documented_and_checked_like_every_other_field() -> None:
    """`environment.stack` decodes into frozen records (the runtime compilers' JSON key `from` onto `source`), the
    schema documents each of them and refuses fields they do not declare, and decode refuses them too; a report
    recorded before the stack facts keeps an empty stack, written back as {}."""
    from gpudoctor.stackfacts import BuildFacts, LibraryFact, RuntimeCompiler, StackFacts

    recorded = FIXTURES / "h100" / "kernel-styles" / "accumulates.json"
    document = json.loads(recorded.read_text())
    stack = decode(document).environment.stack
    assert isinstance(stack.build, BuildFacts) and stack.build.runtime_compilers
    compiler = stack.build.runtime_compilers[0]
    assert isinstance(compiler, RuntimeCompiler)
    assert compiler.source == document["environment"]["stack"]["build"]["runtime_compilers"][0]["from"]
    assert stack.libraries is not None and all(isinstance(f, LibraryFact) for f in stack.libraries.values())
    assert encode(decode(document))["environment"]["stack"] == document["environment"]["stack"]  # key order too
    assert list(encode(decode(document))["environment"]["stack"]) == list(document["environment"]["stack"])

    schema = json.loads(SCHEMA.read_text())["$defs"]
    assert set(schema["RuntimeCompiler"]["properties"]) == {"compiler", "cuda", "from"}
    for name in ("StackFacts", "BuildFacts", "LibraryFact", "RuntimeCompiler", "UnmetRequirement", "DeviceNodes"):
        assert schema[name]["additionalProperties"] is False and schema[name]["description"], name
    for dotted in ("environment.stack.colour", "environment.stack.build.colour",
                   "environment.stack.build.runtime_compilers.0.colour"):  # fmt: skip
        with pytest.raises(ReportError, match="unknown field"):
            decode(_with(document, dotted, "red"))
    before = decode(_fixture("h100-suite-report.json"))
    assert before.environment.stack == StackFacts() and encode(before)["environment"]["stack"] == {}
