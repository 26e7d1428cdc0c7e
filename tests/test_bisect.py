"""`gpudoctor bisect`: the search over releases (every two-block outcome pattern, and the shape seed 002 has), real
bisects in real uv environments installed offline from a wheelhouse of tiny `max` wheels (the crash, the change,
the other way of failing, Ctrl-C keeping finished cells), and the real MAX 25.3..26.7 bisect of seed 002's case on
this CPU, recorded (tests/fixtures/bisect/seed002-cpu)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli, tiny_wheel, validate_report

from gpudoctor.reproducer.bisect import BisectSearch, Way, transitions

RELEASES = [f"90.{n}.0" for n in range(1, 10)]
SEED002 = ROOT / "tests" / "fixtures" / "bisect" / "seed002-cpu"
REPRO = ROOT / "tests" / "reproducers" / "fails_by_release.py"


def test_the_search_finds_the_change_nearest_the_reference_in_every_two_block_pattern() -> None:
    """Exhaustive: every range of up to 16 releases, every reference, every place the way changes, 1 to 5 cells at
    once; the change is found exactly, and with one cell at once in at most 1 + 2 * ceil(log2(n + 1)) cells."""
    for n in range(1, 17):
        for reference in range(n):
            for change in range(n + 1):
                for at_once in (1, 2, 3, 5):
                    truth = {i: Way("crash", "SIGSEGV") if (i >= change) == (reference >= change) else Way("pass")
                             for i in range(n)}  # fmt: skip
                    search = BisectSearch([str(i) for i in range(n)], reference)
                    while picks := search.next(at_once):
                        for i in picks:
                            search.record(i, truth[i])
                    found = transitions(search)
                    if 0 < change < n:
                        assert len(found) == 1 and found[0].exact and found[0].after == str(change)
                    else:
                        assert found == []
                    if at_once == 1:
                        assert len(search.ways) <= 1 + 2 * (n + 1).bit_length()


def test_seed_002s_shape_costs_five_cells_and_tells_the_ways_apart() -> None:
    """The ways seed 002's reproducer ends on MAX 25.3..26.7 (recorded below): import error, the wrong result,
    passes, then fails to import another way. From the reporter's release, 25.4, the change to good costs 5 cells."""
    versions = ["25.3", "25.4", "25.5", "25.6.0", "25.6.1", "25.7", "26.1", "26.2", "26.3", "26.4", "26.5", "26.6",
                "26.7"]  # fmt: skip
    ways = [Way("fail", "ImportError"), Way("fail", "AssertionError"), *[Way("pass")] * 5,
            *[Way("fail", "ModuleNotFoundError")] * 6]  # fmt: skip
    search = BisectSearch(versions, reference=1)
    while picks := search.next():
        for i in picks:
            search.record(i, ways[i])
    assert len(search.ways) == 5
    found = {(t.before, t.after): (t.verdict_before.value, t.verdict_after.value, t.exact) for t in transitions(search)}
    assert found[("25.4", "25.5")] == ("bad", "good", True)
    assert found[("25.3", "25.4")] == ("fails another way", "bad", True)


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheelhouse")
    for version in RELEASES:
        tiny_wheel(folder, "max", version)
    return folder


def _bisect_argv(wheelhouse: Path, envs: Path, *args: str, sleep: str = "0") -> list[str]:
    return ["bisect", "--max", "90.1..90.9", "--find-links", str(wheelhouse), "--offline", "--inherit",
            sys.executable, "--envs", str(envs), "--no-debugger", *args, "--", "python", str(REPRO), sleep]  # fmt: skip


def test_a_bisect_offline_from_a_wheelhouse_finds_where_it_starts_crashing(wheelhouse: Path, tmp_path: Path) -> None:
    completed = run_cli(*_bisect_argv(wheelhouse, tmp_path / "envs", "--json", "--bad", "90.6.0"), timeout=600)
    assert completed.returncode == 1, completed.stderr[-3000:]
    report: dict[str, Any] = json.loads(completed.stdout)
    cells = {c["max"]: c for c in report["cells"]}
    assert len(cells) <= 7 < len(RELEASES)  # not every release: a search
    assert cells["90.6.0"]["way"] == {"outcome": "crash", "detail": "SIGSEGV"}
    changes = {(t["before"], t["after"]): t for t in report["transitions"]}
    broke = changes[("90.4.0", "90.5.0")]
    assert broke["exact"] and broke["verdict_before"] == "good" and broke["verdict_after"] == "bad"
    other = [t for t in report["transitions"] if t["verdict_after"] == "fails another way"]
    assert len(other) == 1 and other[0]["after"] == "90.9.0"
    assert other[0]["way_after"]["detail"].startswith("ImportError")
    assert any("it broke 90.4.0 -> 90.5.0" in line for line in report["verdict"])
    assert any("pin: max==90.4.0" in line for line in report["verdict"])
    kept = json.loads((tmp_path / "envs" / cells["90.6.0"]["report"]).read_text())
    validate_report(kept)  # each cell's report is kept like a sweep cell's

    scanned = run_cli(*_bisect_argv(wheelhouse, tmp_path / "envs", "--json", "--bad", "90.6.0", "--scan"))
    scan = json.loads(scanned.stdout)
    assert [c["max"] for c in scan["cells"]] == RELEASES
    assert sum(c["reused"] for c in scan["cells"]) == len(cells)  # the search's cells are not run again
    assert [(t["before"], t["after"]) for t in scan["transitions"]] == [("90.4.0", "90.5.0"), ("90.8.0", "90.9.0")]


def test_a_reproducer_that_fails_the_same_way_everywhere_is_the_scripts_fault(wheelhouse: Path, tmp_path: Path) -> None:
    completed = run_cli(*_bisect_argv(wheelhouse, tmp_path / "envs", "--max", "90.5..90.8"), timeout=600)
    assert completed.returncode == 1, completed.stderr[-3000:]
    assert "no release change explains it" in completed.stdout and "the script's" in completed.stdout


def test_ctrl_c_mid_bisect_keeps_the_finished_cells(wheelhouse: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "gpudoctor", *_bisect_argv(wheelhouse, tmp_path / "envs", "--json", sleep="3")]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    lines = []
    for line in process.stderr:  # wait for the first cell to end, then stop it in the second
        lines.append(line)
        if line.strip().startswith("MAX 90.9.0:"):
            process.send_signal(signal.SIGINT)
            break
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, "".join(lines) + stderr
    report = json.loads(stdout)
    assert report["interrupted"] and [c["max"] for c in report["cells"]] == ["90.9.0"]
    assert "finished cells are kept" in stderr
    again = run_cli(*_bisect_argv(wheelhouse, tmp_path / "envs", "--json", sleep="3"), timeout=600)
    first = next(c for c in json.loads(again.stdout)["cells"] if c["max"] == "90.9.0")
    assert first["reused"]


def test_seed_002_bisected_over_every_max_release_on_this_cpu() -> None:
    """Recorded here with the real MAX 25.3..26.7 releases (uv, torch 2.13.0 CPU): from the reporter's release
    (25.4: the default parameter gives the factor=3 result) to the fix in 25.5, in 5 cells; 25.3 (no bridge for
    this torch) and 26.2 (max.torch moved) fail another way, told apart from the bug."""
    report = json.loads((SEED002 / "bisect.json").read_text())
    assert len(report["cells"]) <= 5 and len(report["versions"]) == 13
    changes = {(t["before"], t["after"]): t for t in report["transitions"]}
    fixed = changes[("25.4.0", "25.5.0")]
    assert fixed["exact"] and (fixed["verdict_before"], fixed["verdict_after"]) == ("bad", "good")
    assert fixed["way_before"] == {"outcome": "fail", "detail": "AssertionError"}
    assert {t["verdict_after"] for t in report["transitions"] if t["after"] != "25.5.0"} <= {"bad", "fails another way"}
    bad = next(c for c in report["cells"] if c["max"] == "25.4.0")
    assert "the default factor=2 gave [[0.0, 3.0, 6.0]" in bad["summary"]
    for cell in report["cells"]:
        validate_report(json.loads((SEED002 / Path(cell["report"]).name).read_text()))
