"""The compatibility matrix: row validation, atomic merged writes, the real rows, `near`, the README."""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from conftest import ROOT, TESTS, run_cli

from gpudoctor.errors import GpuDoctorError
from gpudoctor.matrix import (
    MatrixError,
    check_matrix,
    load_matrix,
    load_row,
    nearest,
    readme_text,
    row_from_report,
    timelines,
    transitions,
)
from gpudoctor.model import Outcome, Report
from gpudoctor.report.codec import decode
from gpudoctor.suite.catalog import default_probe_dir, load_catalog, run_ids

MATRIX = ROOT / "matrix"
FIXTURES = TESTS / "fixtures"
KNOWN = run_ids(load_catalog(default_probe_dir()))


def _report(name: str) -> Report:
    return decode(json.loads((FIXTURES / name).read_text()))


def _valid_row_data() -> dict[str, Any]:
    row = row_from_report(_report("h100-suite-report.json"), KNOWN)
    return tomllib.loads(row.to_toml())


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split("|")
    for key in parents:
        data = data[key]
    if value is _DELETE:
        del data[last]
    else:
        data[last] = value


_DELETE = object()
_PROBE = "custom-op/cuda"


@pytest.mark.parametrize(
    ("where", "value", "field", "message"),
    [
        ("schema", 3, "schema", "reads schema 1 and 2"),
        ("reports", ["not-an-id"], "reports", "report ids"),
        ("hostname", "box", "hostname", "unknown field"),
        ("environment|gpu", _DELETE, "environment.gpu", "missing"),
        ("environment|torch", "two-point-six", "environment.torch", "not a version"),
        ("environment|gpu_count", "one", "environment.gpu_count", "whole number"),
        ("environment|driver", "580; rm -rf /", "environment.driver", "dotted numbers"),
        ("environment|user", "alice", "environment.user", "unknown field"),
        ("environment|gpu", "GPU-7bc3c477-ac81-8b60-b5e0-00d092caf6a4", "environment.gpu", "GPU UUID"),
        ("results|no-such-probe/cpu", {"outcome": "pass"}, "results.no-such-probe/cpu", "unknown probe id"),
        (f"results|{_PROBE}|outcome", "exploded", f"results.{_PROBE}.outcome", "must be one of"),
        (f"results|{_PROBE}|signal", "segv", f"results.{_PROBE}.signal", "signal name"),
        (f"results|{_PROBE}|signal", "SIGSEGV", f"results.{_PROBE}.signal", "only a crash has a signal"),
        (f"results|{_PROBE}|agreeing", 5, f"results.{_PROBE}.agreeing", "cannot exceed runs"),
        (f"results|{_PROBE}|date", "yesterday", f"results.{_PROBE}.date", "not a date"),
        (f"results|{_PROBE}|colour", "red", f"results.{_PROBE}", "unknown field 'colour'"),
        (f"results|{_PROBE}|outcome", "interrupted", f"results.{_PROBE}.outcome", "must be one of"),
        ("note", "\x1b[2J\x1b[31mall good", "note", "control character (\\x1b)"),
        ("note", "ran in /home/alice/proj", "note", "home directory path"),
        ("note", "x" * 5000, "note", "longer than 1000"),
        ("updated", 20261122, "updated", "must be a string"),
        ("results", {}, "results", "at least one probe"),
    ],
)
def test_bad_rows_are_rejected_naming_file_and_field(
    tmp_path: Path, where: str, value: Any, field: str, message: str
) -> None:
    data = _valid_row_data()
    _set(data, where, value)
    path = tmp_path / "row.toml"
    path.write_text(tomli_w.dumps(data))
    with pytest.raises(MatrixError) as caught:
        load_row(path, KNOWN, strict_name=False)
    text = str(caught.value)
    assert text.startswith(f"{path}: field '{field}': "), text
    assert message in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"schema = 1\n[environment\n", "not valid TOML"),
        (b"note = '\xff\xfe'\n", "not UTF-8 text"),
        (b"# " + b"x" * 70_000 + b"\n", "larger than 64 KiB"),
    ],
)
def test_unreadable_row_files_are_rejected(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "row.toml"
    path.write_bytes(content)
    with pytest.raises(MatrixError, match=message):
        load_row(path, KNOWN, strict_name=False)


def test_a_row_must_live_in_the_file_its_fingerprint_names(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    rows.mkdir()
    row = row_from_report(_report("h100-suite-report.json"), KNOWN)
    (rows / "my-row.toml").write_text(row.to_toml())
    (rows / "notes.txt").write_text("stray")
    valid, errors = check_matrix(tmp_path, KNOWN)
    assert valid == []
    assert errors == [
        f"{rows / 'my-row.toml'}: file name should be {row.file_name} (from its environment's fingerprint)",
        f"{rows / 'notes.txt'}: not a .toml row",
    ]


def test_matrix_check_cli_names_each_bad_file(tmp_path: Path) -> None:
    rows = tmp_path / "rows"
    rows.mkdir()
    good = row_from_report(_report("h100-suite-report.json"), KNOWN)
    (rows / good.file_name).write_text(good.to_toml())
    bad = rows / "bad.toml"
    bad.write_text(good.to_toml().replace('outcome = "pass"', 'outcome = "\\u001b[31mpass"', 1))
    completed = run_cli("matrix", "check", "--matrix", str(tmp_path))
    assert completed.returncode == 1
    assert f"{bad}: field 'results." in completed.stderr and "must be one of" in completed.stderr
    assert "\x1b" not in completed.stderr  # the escape is shown, never sent to the terminal
    assert "1 rows valid, 1 with errors" in completed.stdout


def test_private_data_never_reaches_a_row() -> None:
    report = _report("h100-suite-report.json")
    text = row_from_report(report, KNOWN).to_toml()
    for private in ("/work", "/home", "/root", "UUID", "GPU-", report.environment.python_executable):
        assert private not in text
    # A note is redacted like a report: any user's home, and this machine's real home whatever it is.
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    row = row_from_report(report, KNOWN, note=f"see /home/alice/log.txt and {real_home}/runs/b.txt")
    assert row.note == "see ~/log.txt and ~/runs/b.txt"
    with pytest.raises(GpuDoctorError, match="a GPU UUID"):
        row_from_report(report, KNOWN, note="on GPU-3f9a1c2e-0000-1111-2222-333344445555")


def test_adding_the_same_environment_merges_into_one_file(tmp_path: Path) -> None:
    source = FIXTURES / "h100-suite-report.json"
    first = run_cli("matrix", "add", "--from", str(source), "--matrix", str(tmp_path), "--note", "first")
    assert first.returncode == 0, first.stderr
    (path,) = (tmp_path / "rows").glob("*.toml")
    before = path.read_bytes()
    again = run_cli("matrix", "add", "--from", str(source), "--matrix", str(tmp_path))  # the same report
    assert again.returncode == 0 and again.stdout.startswith(f"already in {path}"), again.stdout
    assert path.read_bytes() == before  # counted once
    cached = FIXTURES / "h100-suite-report-cached.json"
    other = run_cli("matrix", "add", "--from", str(cached), "--matrix", str(tmp_path))
    assert other.stdout.startswith("merged into"), other.stdout
    document = json.loads(source.read_text())
    crashed = next(r for r in document["results"] if r["id"] == _PROBE)
    crashed.update(outcome="crash", signal="SIGSEGV")
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(document))
    third = run_cli("matrix", "add", "--from", str(changed), "--matrix", str(tmp_path))
    assert f"outcome changed for {_PROBE}" in third.stdout
    data = tomllib.loads(path.read_text())
    assert data["note"] == "first"
    assert data["results"][_PROBE] == {
        "outcome": "crash",
        "signal": "SIGSEGV",
        "runs": 3,
        "agreeing": 1,
        "date": "2026-11-22",
        "doctor": "0.1.0",
    }
    assert data["results"]["torch-env/cuda"]["runs"] == 3 and data["results"]["torch-env/cuda"]["agreeing"] == 3
    assert len(data["reports"]) == 3
    assert list((tmp_path / "rows").iterdir()) == [path]
    assert path.stat().st_mode & 0o777 == 0o644  # shared data: readable by everyone


def test_rows_of_schema_1_are_still_read(tmp_path: Path) -> None:
    data = _valid_row_data()
    data["schema"] = 1
    del data["reports"]
    path = tmp_path / "row.toml"
    path.write_text(tomli_w.dumps(data))
    assert load_row(path, KNOWN, strict_name=False).reports == ()


_WRITER = """
import resource, signal, sys
from pathlib import Path
from gpudoctor.atomic import atomic_write
if sys.argv[2] == "killed":
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it by default: the write fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
atomic_write(Path(sys.argv[1]), "new row\\n" * 100_000)
"""


@pytest.mark.parametrize("how", ["killed", "ignore"])
def test_a_write_interrupted_midway_leaves_the_old_row_whole(tmp_path: Path, how: str) -> None:
    target = tmp_path / "rows" / "row.toml"
    target.parent.mkdir()
    target.write_text("old row\n")
    completed = subprocess.run([sys.executable, "-c", _WRITER, str(target), how], capture_output=True, text=True)
    if how == "killed":  # the kernel stops the writer mid-file with SIGXFSZ: nothing can clean up
        assert completed.returncode == -signal.SIGXFSZ
        leftovers = list(target.parent.glob(".row.toml.*.partial"))
        assert len(leftovers) == 1 and leftovers[0].stat().st_size == 4096
    else:
        assert completed.returncode == 1 and "File too large" in completed.stderr
        assert list(target.parent.glob(".*.partial")) == []
    assert target.read_text() == "old row\n"  # never half-written
    _, errors = check_matrix(tmp_path, KNOWN)
    assert not any(".partial" in e for e in errors)  # a leftover is not mistaken for a row


# --- the real rows ------------------------------------------------------------------------------------


def test_the_real_rows_are_valid_and_come_from_several_environments() -> None:
    completed = run_cli("matrix", "check", "--matrix", str(MATRIX))
    assert completed.returncode == 0, completed.stderr
    rows = load_matrix(MATRIX, KNOWN)
    environments = {(r.value("gpu"), r.value("torch"), r.value("max")) for r in rows}
    assert ("NVIDIA H100 80GB HBM3", "2.11.0", "26.7.0") in environments
    assert ("cpu", "2.13.0+cpu", "26.7.0") in environments
    assert ("cpu", "2.13.0+cpu", "26.1.0") in environments


def test_matrix_readme_is_generated_from_the_rows() -> None:
    expected = readme_text(load_matrix(MATRIX, KNOWN))
    assert (MATRIX / "README.md").read_text() == expected, "matrix/README.md is stale: run gpudoctor matrix readme"
    assert run_cli("matrix", "readme", "--check", "--matrix", str(MATRIX)).returncode == 0


def test_the_readmes_example_row_is_a_valid_row_of_the_schema_rows_are_written_in() -> None:
    """The row format the README shows is one `matrix check` accepts, in the schema gpudoctor writes today."""
    from gpudoctor.matrix.schema import ROW_SCHEMA, parse_row

    text = (MATRIX / "README.md").read_text()
    assert f"## Row format (schema {ROW_SCHEMA})" in text
    example = text.split("```toml\n", 1)[1].split("```", 1)[0]
    row = parse_row(Path("README.md"), tomllib.loads(example), KNOWN)
    assert tomllib.loads(example)["schema"] == ROW_SCHEMA
    assert row.results["custom-op/cuda"].outcome.value == "pass" and row.reports == ("3f9a0c1d2b4e5f60",)


def test_markup_in_rows_is_escaped_in_the_readme(tmp_path: Path) -> None:
    row = row_from_report(_report("h100-suite-report.json"), KNOWN, note="<script>alert(1)</script> [bold]x[/] | y")
    text = readme_text([row])
    assert "&lt;script&gt;alert(1)&lt;/script&gt; [bold]x[/] \\| y" in text and "<script>" not in text


def test_near_on_the_real_rows_ranks_by_what_differs() -> None:
    rows = load_matrix(MATRIX, KNOWN)
    completed = run_cli(
        "matrix", "near", "--from", str(FIXTURES / "cpu-max26.1-report.json"), "--matrix", str(MATRIX), "--count", "20"
    )
    assert completed.returncode == 0, completed.stderr
    blocks = completed.stdout.split("\n\n")
    assert blocks[1].splitlines()[:2] == [
        "cpu_torch-2.13.0+cpu_max-26.1.0_f99f013d508b.toml (distance 0)",
        "  same environment",
    ]
    # Then the other MAX releases on this CPU and torch (distance 4: max and the Mojo compiler differ) ...
    nearest_blocks = [b for b in blocks if "(distance 4)" in b]
    assert any(
        b.splitlines()[:2]
        == [
            "cpu_torch-2.13.0+cpu_max-26.7.0_936cbf9b7de5.toml (distance 4)",
            "  differs: max 26.1.0 → 26.7.0, mojo-compiler 0.26.1.0 → 1.2.0",
        ]
        for b in nearest_blocks
    )
    assert all(b.startswith("cpu_torch-2.13.0+cpu_max-") for b in nearest_blocks)
    # ... and an outcome that differs there is named: MAX 25.4's default-parameter bug.
    (old,) = [b for b in blocks if b.startswith("cpu_torch-2.13.0+cpu_max-25.4.0_")]
    assert "custom-op-params/cpu: here pass, there fail" in old
    # The H100 run, compared with the H100 rows: the same environment first.
    h100 = nearest(row_from_report(_report("h100-suite-report.json"), KNOWN).environment, rows)
    assert h100[0].distance == 0 and h100[0].row.value("gpu") == "NVIDIA H100 80GB HBM3"
    assert h100[0].row.value("max") == "26.7.0"
    sentences = {t.sentence() for t in transitions(rows)}
    assert "max 25.4.0 → 25.5.0 turned custom-op-params/cpu from fail to pass" in sentences


def test_transitions_name_the_one_field_that_changed() -> None:
    old = row_from_report(_report("cpu-max26.1-report.json"), KNOWN)
    new = row_from_report(_report("cpu-max26.7-report.json"), KNOWN)
    broken = dataclasses.replace(
        old,
        results={
            **old.results,
            "custom-op/cpu": dataclasses.replace(old.results["custom-op/cpu"], outcome=Outcome.CRASH, signal="SIGSEGV"),
        },
    )
    (found,) = transitions([new, broken])
    assert found.sentence() == "max 26.1.0 → 26.7.0 turned custom-op/cpu from crash (SIGSEGV) to pass"


def test_timelines_say_where_along_the_releases_an_outcome_changes() -> None:
    base = row_from_report(_report("cpu-max26.7-report.json"), KNOWN)

    def at(max_version: str, params: Outcome) -> Any:
        environment = {**base.environment, "max": max_version}
        changed = dataclasses.replace(base.results["custom-op-params/cpu"], outcome=params)
        results = {**base.results, "custom-op-params/cpu": changed}
        return dataclasses.replace(base, environment=environment, results=results)

    rows = [at("25.6.0", Outcome.PASS), at("25.4.0", Outcome.FAIL), at("25.5.0", Outcome.PASS)]
    rows.append(at("26.7.0", Outcome.PASS))
    (line,) = timelines(rows)
    assert line.sentence() == (
        "custom-op-params/cpu (gpu cpu, torch 2.13.0+cpu, python 3.11.7): "
        "fail on max 25.4.0; pass on max 25.5.0 … 26.7.0"
    )
    assert "## What changed across releases" in readme_text(rows)


def test_runs_carried_on_with_a_patch_are_not_the_stacks_outcome() -> None:
    report = decode(json.loads((FIXTURES / "sweep-cpu" / "py3.11_torch-2.6.0_max-26.1.0.json").read_text()))
    patched = [r.id for r in report.results if "patches_applied" in r.details]
    assert patched  # custom-op-via-graph/cpu and custom-op-params/cpu ran on with the float8 patch
    row = row_from_report(report, KNOWN)
    assert not set(patched) & set(row.results)
    assert row.results["custom-op/cpu"].outcome is Outcome.FAIL


def test_the_workflow_for_contributed_rows_runs_the_checks_a_pull_request_needs(tmp_path: Path) -> None:
    """.github/workflows/matrix.yml parses, runs on pull requests that touch matrix/, and its gpudoctor commands,
    run for real on a copy of the committed matrix, pass; with a broken row the check fails the pull request, and a
    row added without regenerating the README fails the README check."""
    import shutil

    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "matrix.yml").read_text())
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert trigger["pull_request"]["paths"] == ["matrix/**"]
    steps = workflow["jobs"]["check"]["steps"]
    commands = [s["run"] for s in steps if "run" in s and s["run"].startswith("gpudoctor ")]
    assert commands == ["gpudoctor matrix check", "gpudoctor matrix readme --check"]
    shutil.copytree(ROOT / "matrix", tmp_path / "matrix")

    def run(command: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "gpudoctor", *command.split()[1:]]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)

    for command in commands:
        assert run(command).returncode == 0, command
    row = sorted((tmp_path / "matrix" / "rows").glob("h200_*.toml"))[0]
    row.write_text(row.read_text().replace('outcome = "pass"', 'outcome = "maybe"', 1))
    broken = run(commands[0])
    assert broken.returncode == 1 and row.name in broken.stdout + broken.stderr
    shutil.rmtree(tmp_path / "matrix")
    shutil.copytree(ROOT / "matrix", tmp_path / "matrix")
    (tmp_path / "matrix" / "rows" / row.name).unlink()  # a row change without the regenerated README
    assert run(commands[1]).returncode != 0
