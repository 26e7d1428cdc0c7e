"""Careless and hostile inputs against real gpudoctor processes: bad interpreters, special files, huge and
broken data, read-only and full file systems, stdout that cannot be written, concurrent writers. Every answer
is one line and exit 2 (or the documented 0/1), never a traceback, and nothing is lost or half-written.

The cases live in hostile_cases.py; scripts/hostile_inputs.py writes them with the real answers to
docs/hostile-inputs.md, which a test here keeps in step.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest
from conftest import MARKER_ENV, ROOT, processes_with_marker
from hostile_cases import CASES, FIXTURE, Case, can_mount, expand, prepare, run_case

from gpudoctor.errors import GpuDoctorError
from gpudoctor.facts import interpreter

DOC = ROOT / "docs" / "hostile-inputs.md"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    prepare(folder)
    return folder


@pytest.fixture(scope="module")
def mounts() -> bool:
    return can_mount()


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_every_hostile_input_gets_its_answer(case: Case, scratch: Path, mounts: bool) -> None:
    answer = run_case(case, scratch, mounts)
    if answer is None:
        pytest.skip("needs a full file system, which only root with unshare can make here")
    assert "Traceback" not in answer.stderr, answer.stderr[-3000:]
    assert answer.exit == case.exit, answer.stderr[-3000:]
    says = expand(case.says, scratch)
    if case.exit == 2:
        lines = answer.stderr.strip().splitlines()
        assert len(lines) == 1, answer.stderr[-3000:]
        assert lines[0].startswith("gpudoctor: error: ") and says in lines[0], lines[0]
    else:
        assert says in answer.stdout + answer.stderr, (answer.stdout + answer.stderr)[-3000:]


def test_a_full_or_read_only_disk_leaves_nothing_half_written(scratch: Path, mounts: bool) -> None:
    if not mounts:
        pytest.skip("needs a private mount namespace (root with unshare)")
    for case_id in ("matrix-full", "matrix-read-only"):
        case = next(c for c in CASES if c.id == case_id)
        answer = run_case(case, scratch, mounts)
        assert answer is not None and answer.exit == 2
        left = (scratch / "mnt-after.txt").read_text().split()
        assert not [name for name in left if name.endswith(".partial") or name.endswith(".toml")], left


def test_a_report_added_twice_counts_once_and_rows_are_readable_by_all(scratch: Path) -> None:
    case = next(c for c in CASES if c.id == "same-report-twice")
    answer = run_case(case, scratch, mounts=False)
    assert answer is not None and answer.exit == 0
    (row,) = (scratch / "m2" / "rows").iterdir()
    data = tomllib.loads(row.read_text())
    assert len(data["reports"]) == 1
    assert {r["runs"] for r in data["results"].values()} == {1}
    assert row.stat().st_mode & 0o777 == 0o644


def test_concurrent_matrix_add_processes_lose_no_row(tmp_path: Path) -> None:
    """Several `gpudoctor matrix add` processes at once, each with its own report, in three trials: every
    report is in the matrix afterwards, once, and no temporary file is left."""
    document = json.loads(FIXTURE.read_text())
    for trial in range(3):
        matrix, sources = tmp_path / f"matrix-{trial}", []
        for number in range(6):
            variant = json.loads(json.dumps(document))
            variant["created"] = f"2026-11-23T10:{trial:02d}:{number:02d}+00:00"
            variant["environment"]["packages"]["torch"] = ("2.11.0", "2.12.0")[number % 2]
            path = tmp_path / f"report-{trial}-{number}.json"
            path.write_text(json.dumps(variant))
            sources.append(path)
        writers = [
            subprocess.Popen(
                [sys.executable, "-m", "gpudoctor", "matrix", "add", "--matrix", str(matrix), "--from", str(p)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for p in sources
        ]
        for writer in writers:
            _, err = writer.communicate(timeout=120)
            assert writer.returncode == 0, err.decode()
        rows = sorted((matrix / "rows").iterdir())
        assert [p.suffix for p in rows] == [".toml", ".toml"]
        assert sum(len(tomllib.loads(p.read_text())["reports"]) for p in rows) == 6
        assert not [p for p in matrix.rglob("*.partial")]


def test_an_interpreter_that_never_answers_is_stopped_and_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER_ENV, marker)
    monkeypatch.setattr(interpreter, "ANSWER_TIMEOUT_S", 1.0)
    hangs = tmp_path / "hangs"
    hangs.write_text("#!/bin/sh\nsleep 600 &\nsleep 600\n")  # a grandchild too: the whole group must go
    hangs.chmod(0o755)
    with pytest.raises(GpuDoctorError, match=r"no answer within 1 s"):
        interpreter.ask(str(hangs), "print(1)")
    assert processes_with_marker(marker) == []


def test_the_documented_table_lists_every_case_with_its_exit_status() -> None:
    """docs/hostile-inputs.md is written by scripts/hostile_inputs.py from real runs: one row per case."""
    rows = re.findall(r"^\| `([a-z0-9-]+)` \|.*\| (\d+|skipped) \|", DOC.read_text(), flags=re.MULTILINE)
    assert [case_id for case_id, _ in rows] == [c.id for c in CASES]
    for (_, code), case in zip(rows, CASES, strict=True):
        assert code in (str(case.exit), "skipped"), case.id


def test_privacy_holds_for_any_host_and_user_name(tmp_path: Path) -> None:
    """A real doctor in a UTS namespace whose host name contains the user name, with a home that is not under
    /home: neither name, in any form, nor the home reaches the JSON report or the Markdown."""
    if os.geteuid() != 0 or subprocess.run(["unshare", "-u", "true"], check=False).returncode != 0:
        pytest.skip("needs a private UTS namespace (root with unshare) to choose the host name")
    home = tmp_path / "srv" / "alice"
    home.mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "USER": "alice", "LOGNAME": "alice",
           "LD_LIBRARY_PATH": f"{home}/cuda/lib64:/opt/Alice-GPU07/lib",
           "CUDA_HOME": "/scratch/alice-gpu07_cuda"}  # fmt: skip
    for face in ("--json", "--markdown"):
        completed = subprocess.run(
            ["unshare", "-u", "sh", "-c", 'hostname Alice-GPU07.cluster.example.org && exec "$@"', "sh",
             sys.executable, "-m", "gpudoctor", face, "--no-probes"],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stderr
        text = completed.stdout
        for private in ("alice", "gpu07", "cluster.example.org", str(home)):
            assert private not in text.lower(), (private, text)
        assert "~/cuda/lib64" in text
