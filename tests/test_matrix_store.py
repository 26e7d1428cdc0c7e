"""The matrix store under concurrent writers: real processes (and threads) adding rows into one folder at once,
then exact counts. Before the store took a lock, 6 of 15 such trials lost rows."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS

from gpudoctor.matrix import MatrixError, MatrixStore, row_from_report
from gpudoctor.model import Report
from gpudoctor.report.codec import decode
from gpudoctor.suite.catalog import default_probe_dir, load_catalog, run_ids

FIXTURE = TESTS / "fixtures" / "h100-suite-report.json"
KNOWN = run_ids(load_catalog(default_probe_dir()))
TORCH_VERSIONS = ("2.11.0", "2.12.0", "2.13.0", "2.14.0")  # one environment (row file) each

_WRITER = """
import json, sys
from pathlib import Path
from gpudoctor.suite.catalog import default_probe_dir, load_catalog, run_ids
from gpudoctor.matrix import MatrixStore, row_from_report
from gpudoctor.model import Report
from gpudoctor.report.codec import decode

known = run_ids(load_catalog(default_probe_dir()))
store = MatrixStore(Path(sys.argv[1]))
reports = [decode(json.loads(Path(p).read_text())) for p in sys.argv[2:]]
for report in reports + reports[:1]:  # the first report twice: it must count once
    store.add(row_from_report(report, known))
"""


def _variant(document: dict[str, Any], number: int) -> dict[str, Any]:
    """The recorded H100 report as if run ``number`` times in one of four environments (torch versions)."""
    variant = json.loads(json.dumps(document))
    variant["created"] = f"2026-11-22T16:{number // 60:02d}:{number % 60:02d}+00:00"  # a distinct report
    variant["environment"]["packages"]["torch"] = TORCH_VERSIONS[number % len(TORCH_VERSIONS)]
    return variant


def _expect_exact_counts(matrix: Path, reports_per_environment: int) -> None:
    rows = sorted((matrix / "rows").iterdir())
    assert len(rows) == len(TORCH_VERSIONS), [p.name for p in rows]  # no partial file left, no row lost
    for path in rows:
        data = tomllib.loads(path.read_text())
        assert len(data["reports"]) == len(set(data["reports"])) == reports_per_environment
        for probe, result in data["results"].items():
            assert result["runs"] == reports_per_environment, (path.name, probe, result)
            assert result["agreeing"] == reports_per_environment, (path.name, probe, result)
    assert MatrixStore(matrix).check(KNOWN)[1] == []


def test_many_writer_processes_lose_nothing(tmp_path: Path) -> None:
    document = json.loads(FIXTURE.read_text())
    processes, per_process = 16, 5
    sources = []
    for number in range(processes * per_process):
        path = tmp_path / "reports" / f"{number}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(_variant(document, number)))
        sources.append(str(path))
    matrix = tmp_path / "matrix"
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(matrix), *sources[i::processes]], stderr=subprocess.PIPE)
        for i in range(processes)
    ]
    for writer in writers:
        _, stderr = writer.communicate(timeout=300)
        assert writer.returncode == 0, stderr.decode()[-2000:]
    _expect_exact_counts(matrix, processes * per_process // len(TORCH_VERSIONS))


def test_many_writer_threads_lose_nothing(tmp_path: Path) -> None:
    document = json.loads(FIXTURE.read_text())
    store = MatrixStore(tmp_path)
    reports = [decode(_variant(document, n)) for n in range(48)]
    errors: list[BaseException] = []

    def write(batch: list[Report]) -> None:
        try:
            for report in batch:
                store.add(row_from_report(report, KNOWN))
        except BaseException as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(reports[i::8],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    _expect_exact_counts(tmp_path, 48 // len(TORCH_VERSIONS))


def test_a_folder_that_cannot_hold_rows_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "rows").write_text("a file where the rows folder should be")
    row = row_from_report(decode(json.loads(FIXTURE.read_text())), KNOWN)
    with pytest.raises(MatrixError, match=r"cannot write to the matrix: File exists"):
        MatrixStore(tmp_path).add(row)
    assert (tmp_path / "rows").read_text() == "a file where the rows folder should be"
