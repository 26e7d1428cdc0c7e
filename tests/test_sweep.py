"""`gpudoctor sweep` for real: environments built by uv, the doctor run in each, rows merged, kept cells
reused, a cell that cannot be installed recorded with the resolver's reason, Ctrl-C keeping finished cells.

To stay within CI's minutes the cells inherit this interpreter's torch (``--inherit``); the MAX of a cell that
differs from the installed one is really installed by uv from the package index.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, tiny_wheel
from packaging.version import Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.sweep.grid import expand_versions, released_versions

TORCH = version("torch")
MAX = version("max")
OTHER_MAX = "25.6.0"  # a MAX of another era, installed by uv into its cell


def _sweep(tmp_path: Path, *args: str, timeout: float = 900) -> tuple[int, dict[str, Any], str]:
    completed = run_cli(
        "sweep",
        *("--envs", str(tmp_path / "envs"), "--matrix", str(tmp_path / "matrix"), "--inherit", sys.executable),
        *("--json", *args),
        timeout=timeout,
    )
    assert completed.stdout, completed.stderr[-3000:]
    return completed.returncode, json.loads(completed.stdout), completed.stderr


@pytest.fixture(scope="module")
def two_cells(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, dict[str, Any], str]:
    tmp_path = tmp_path_factory.mktemp("sweep")
    (tmp_path / "matrix" / "rows").mkdir(parents=True)
    code, grid, stderr = _sweep(tmp_path, "--torch", TORCH, "--max", f"{MAX},{OTHER_MAX}", "--only", "max-import")
    return tmp_path, code, grid, stderr


def test_a_sweep_builds_each_cell_examines_it_and_records_its_row(
    two_cells: tuple[Path, int, dict[str, Any], str],
) -> None:
    tmp_path, code, grid, stderr = two_cells
    cells = {c["cell"]["max"]: c for c in grid["cells"]}
    assert set(cells) == {MAX, OTHER_MAX}
    for max_version, cell in cells.items():
        assert cell["status"] == "healthy", cell
        assert cell["installed"] == {"torch": TORCH, "max": max_version}  # what the environment really has
        report = json.loads((tmp_path / "envs" / cell["report"]).read_text())
        assert report["environment"]["packages"]["max"] == max_version
        (result,) = [r for r in report["results"] if r["id"] == "max-import"]
        assert result["outcome"] == "pass" and f"MAX {max_version}" in result["summary"]
    assert code == 0
    rows = sorted((tmp_path / "matrix" / "rows").glob("*.toml"))
    assert sorted(tomllib.loads(p.read_text())["environment"]["max"] for p in rows) == sorted([MAX, OTHER_MAX])
    assert "building the environment" in stderr and "[2/2]" in stderr  # progress while it runs


def test_a_second_sweep_reuses_kept_cells_and_counts_nothing_twice(
    two_cells: tuple[Path, int, dict[str, Any], str],
) -> None:
    tmp_path = two_cells[0]
    rows_before = {p.name: p.read_text() for p in (tmp_path / "matrix" / "rows").glob("*.toml")}
    code, again, stderr = _sweep(tmp_path, "--torch", TORCH, "--max", f"{MAX},{OTHER_MAX}", "--only", "max-import")
    assert code == 0
    assert all(cell["reused"] for cell in again["cells"])
    assert "kept from an earlier sweep" in stderr
    assert {p.name: p.read_text() for p in (tmp_path / "matrix" / "rows").glob("*.toml")} == rows_before
    # Another request (here: other probes) is not served from the kept cells.
    code, other, _ = _sweep(tmp_path, "--torch", TORCH, "--max", MAX, "--only", "torch-env", "--no-matrix")
    assert code == 0 and not other["cells"][0]["reused"]


def test_a_cell_that_cannot_be_installed_says_why(tmp_path: Path) -> None:
    code, grid, _ = _sweep(tmp_path, "--torch", TORCH, "--max", "99.0.0", "--only", "max-import", "--no-matrix")
    (cell,) = grid["cells"]
    assert cell["status"] == "unresolvable", cell
    assert "max==99.0.0" in cell["reason"]
    assert code == 1


def test_ctrl_c_keeps_the_cells_that_ended(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "gpudoctor", "sweep", "--envs", str(tmp_path / "envs"), "--no-matrix",
        "--inherit", sys.executable, "--torch", TORCH, "--max", f"{MAX},{OTHER_MAX}", "--only", "custom-op",
    ]  # fmt: skip
    sweep = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    assert sweep.stderr is not None
    lines = []
    deadline = time.monotonic() + 600
    while not any(line.startswith("[1/2]") and "pass" in line for line in lines):
        assert time.monotonic() < deadline and sweep.poll() is None, "".join(lines)
        lines.append(sweep.stderr.readline())
    time.sleep(1.0)  # the second cell is being built or examined
    sweep.send_signal(signal.SIGINT)
    stdout, rest = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, rest
    assert "finished cells are kept" in rest
    kept = sorted(p.name for p in (tmp_path / "envs" / "results").glob("*.json") if not p.name.endswith(".report.json"))
    assert len(kept) == 1  # the cell that ended; the interrupted one is not kept as a result
    assert "interrupted" in stdout


def test_versions_lines_and_ranges_expand_against_the_releases() -> None:
    releases = [Version(v) for v in ("2.5.1", "2.6.0", "2.9.0", "2.9.1", "2.13.0", "2.14.1")]
    lister = lambda name: releases  # noqa: E731  (the index's answer, fixed for this test)
    assert expand_versions("2.6,2.9,2.13.0", "torch", lister) == ["2.6.0", "2.9.1", "2.13.0"]
    assert expand_versions("2.6..2.13", "torch", lister) == ["2.6.0", "2.9.0", "2.9.1", "2.13.0"]
    assert expand_versions(["2.9.1", "2.9"], "torch", lister) == ["2.9.1"]
    for bad, message in (("2.13..2.6", "runs backwards"), ("3.0", "no release"), ("two", "not a version")):
        with pytest.raises(GpuDoctorError, match=message):
            expand_versions(bad, "torch", lister)


def test_the_releases_come_from_the_package_index() -> None:
    releases = released_versions("max")
    assert Version("25.4.0") in releases and Version(MAX) in releases
    assert releases == sorted(releases)


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args, message in (
        (["--torch", "", "--max", "26.7.0"], "--torch: no versions given"),
        (["--torch", "2.13.0", "--max", "26.7.0", "--inherit", str(tmp_path / "nope")], "no such interpreter"),
        (["--grid", str(tmp_path)], "is a folder, not a file"),
    ):
        completed = run_cli("sweep", "--envs", str(tmp_path / "envs"), "--no-matrix", *args)
        assert completed.returncode == 2, completed.stderr
        assert message in completed.stderr and "Traceback" not in completed.stderr


def test_a_sweep_installs_offline_from_a_wheelhouse(tmp_path: Path) -> None:
    """--find-links DIR --offline: the releases come from the wheelhouse alone (a range over them), and uv installs
    from it with no index (tiny real `max` wheels here; a GPU cluster's staged MAX releases in use)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for release in ("91.1.0", "91.2.0"):
        tiny_wheel(wheels, "max", release)
    _, grid, stderr = _sweep(
        tmp_path, "--torch", TORCH, "--max", "91.1..91.2", "--find-links", str(wheels), "--offline",
        "--only", "torch-env", "--no-matrix",
    )  # fmt: skip
    assert [c["installed"]["max"] for c in grid["cells"]] == ["91.1.0", "91.2.0"], stderr[-2000:]
    assert all(c["status"] in ("healthy", "problem") for c in grid["cells"])
    refused = run_cli("sweep", "--torch", TORCH, "--max", "91.1.0", "--offline")
    assert refused.returncode == 2 and "--offline needs --find-links" in refused.stderr


def test_the_sweep_options_pick_the_machines_defaults_once_where_they_are_made(tmp_path: Path) -> None:
    """Cells at once and probes per cell default to what the machine allows (one cell per four probe slots), given
    values are kept, and options copied for a node of a Ray sweep (one cell at a time there) keep the probes per
    cell the driver chose."""
    import dataclasses

    from gpudoctor.doctor import default_jobs
    from gpudoctor.subject import ProbeSuite
    from gpudoctor.sweep.run import SweepOptions

    chosen = SweepOptions(cells=(), envs_dir=tmp_path, subject=ProbeSuite())
    assert chosen.parallel == max(1, default_jobs() // 4)
    assert chosen.probe_jobs == max(1, default_jobs() // chosen.parallel)
    given = SweepOptions(cells=(), envs_dir=tmp_path, subject=ProbeSuite(), parallel=3, probe_jobs=5)
    assert (given.parallel, given.probe_jobs) == (3, 5)
    assert SweepOptions(cells=(), envs_dir=tmp_path, subject=ProbeSuite(), parallel=64).probe_jobs == 1
    on_a_node = dataclasses.replace(chosen, parallel=1)
    assert (on_a_node.parallel, on_a_node.probe_jobs) == (1, chosen.probe_jobs)


def test_a_cell_that_raises_stops_the_sweep_at_once(tmp_path: Path) -> None:
    """The doctor failing inside one cell (a broken knowledge file fails every cell alike) ends the sweep with that
    error at once: the cell running beside it is stopped and the cells not started never start; the caller's own
    scope is left as it was (not an interruption)."""
    from gpudoctor.process.cancel import CancelScope
    from gpudoctor.subject import ProbeSuite
    from gpudoctor.sweep.grid import Cell, CellResult, CellStatus
    from gpudoctor.sweep.run import Sweep, SweepOptions

    seen: dict[str, bool] = {}

    class DoctorFailsInTheFirstCell(Sweep):  # what fails is the doctor itself, as a bug in it would
        def examine(self, cell: Cell, cancel: CancelScope, on_event: Any) -> CellResult:
            if cell.max == "1.0.0":
                time.sleep(0.5)  # the second cell is running by now
                raise GpuDoctorError("known_issues.toml: unknown predicate")
            seen[cell.max] = cancel.wait(60)  # stopped from outside, or 60 s
            return CellResult(cell, CellStatus.INTERRUPTED)

    grid = [Cell(TORCH, release, "3.11") for release in ("1.0.0", "2.0.0", "3.0.0", "4.0.0")]
    options = SweepOptions(cells=tuple(grid), envs_dir=tmp_path, subject=ProbeSuite(), parallel=2, probe_jobs=1)
    caller = CancelScope()
    started = time.monotonic()
    with pytest.raises(GpuDoctorError, match="unknown predicate"):
        DoctorFailsInTheFirstCell(options).run(cancel=caller)
    assert time.monotonic() - started < 30
    assert seen == {"2.0.0": True}  # stopped, not left to run out; 3.0.0 and 4.0.0 never started
    assert not caller.cancelled
