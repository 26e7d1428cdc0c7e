"""Where a run's time goes (per-step wall time, CPU time, peak memory from real probe processes), and the speed
measures that must not weaken isolation: reused temporary folders and warm caches, learned start order."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT, synthetic_copy, validate_report

from gpudoctor.doctor import DoctorOptions, diagnose
from gpudoctor.model import Device, Outcome, ProbeSpec
from gpudoctor.report.codec import encode
from gpudoctor.suite.caches import reserved_temp_dir
from gpudoctor.suite.plan import PlannedRun
from gpudoctor.suite.runner import STARTUP_STEP, ProbeInvocation, run_probe
from gpudoctor.suite.schedule import run_plan

SYNTHETIC = ROOT / "tests" / "synthetic_probes"
IDENTITY_CATALOG = """
[[probe]]
id = "first"
script = "identity.py"
title = "notes its process group and temporary folder"
devices = ["cpu"]
details = ["pid", "pgid", "tmpdir"]

[[probe]]
id = "second"
script = "identity.py"
title = "the same, beside it"
devices = ["cpu"]
details = ["pid", "pgid", "tmpdir"]

[[probe]]
id = "segfaults"
script = "segfaults.py"
title = "crashes while the others run"
"""


def _invocation(script: str, probe_id: str, device: Device = Device.NONE, stage: int = 1) -> ProbeInvocation:
    spec = ProbeSpec(id=probe_id, script=script, title=probe_id, stage=stage, devices=(device,), details=("answer",))
    return ProbeInvocation(spec, device, sys.executable, SYNTHETIC, 60)


def test_every_second_of_a_run_is_in_a_step() -> None:
    result = run_probe(_invocation("passes.py", "passes", Device.CPU))
    assert result.outcome is Outcome.PASS
    names = [step.name for step in result.steps]
    assert names == [STARTUP_STEP, "add numbers", "interpreter shutdown"]
    accounted = sum(step.duration_s for step in result.steps)
    assert abs(accounted - result.duration_s) < 0.05, (accounted, result.duration_s)
    for before, after in zip(result.steps, result.steps[1:], strict=False):
        assert after.start_s >= before.start_s
    assert result.cpu_s is not None and result.cpu_s > 0
    assert result.peak_rss_mib is not None and 5 < result.peak_rss_mib < 1024


def test_a_crash_is_timed_up_to_the_moment_it_happened() -> None:
    result = run_probe(_invocation("segfaults.py", "segfaults"))
    assert result.outcome is Outcome.CRASH
    assert [step.name for step in result.steps] == [STARTUP_STEP, "read address 0"]
    assert abs(sum(step.duration_s for step in result.steps) - result.duration_s) < 0.05


def test_timings_reach_json_and_markdown(tmp_path: Path) -> None:
    probes = synthetic_copy(tmp_path, IDENTITY_CATALOG)
    report = diagnose(DoctorOptions(probe_dir=probes, jobs=3))
    validate_report(json.loads(json.dumps(encode(report))))
    first = encode(report)["results"][0]
    assert first["steps"][0]["name"] == STARTUP_STEP and first["cpu_s"] > 0 and first["peak_rss_mib"] > 0
    from gpudoctor.report.text import to_markdown

    markdown = to_markdown(report)
    assert "<summary>Where the time went</summary>" in markdown
    assert "stay a while, so that its neighbours run at the same time 1.0 s" in markdown


def test_a_crash_beside_reused_folders_and_warm_caches_touches_no_other_run(tmp_path: Path) -> None:
    """Three probes at once, one of them segfaulting: each in a process group of its own (it leads it), each
    with a temporary folder no other run shares; the two that pass pass. Run twice, each run id gets its own
    folder back (the warm MAX cache depends on it) and still never another's."""
    probes = synthetic_copy(tmp_path, IDENTITY_CATALOG)
    folders = []
    for _ in range(2):
        report = diagnose(DoctorOptions(probe_dir=probes, jobs=3))
        outcomes = {r.id: r.outcome for r in report.results}
        assert outcomes == {"first/cpu": Outcome.PASS, "second/cpu": Outcome.PASS, "segfaults": Outcome.CRASH}
        details = [report.result(run_id).details for run_id in ("first/cpu", "second/cpu")]  # type: ignore[union-attr]
        assert all(d["pid"] == d["pgid"] for d in details)  # group leaders: a kill of one group is that run alone
        assert details[0]["pgid"] != details[1]["pgid"] and os.getpgrp() not in {d["pgid"] for d in details}
        assert details[0]["tmpdir"] != details[1]["tmpdir"]
        folders.append((details[0]["tmpdir"], details[1]["tmpdir"]))
    assert folders[0] == folders[1]


def test_a_reserved_folder_is_never_shared_between_two_runs_at_once(tmp_path: Path) -> None:
    fallback = tmp_path / "fallback"
    with reserved_temp_dir("custom-op/cpu", "/venv/bin/python", fallback) as first:
        with reserved_temp_dir("custom-op/cpu", "/venv/bin/python", fallback) as second:
            assert first != fallback and second == fallback
        with reserved_temp_dir("custom-op/cpu", "/other/bin/python", fallback) as other:
            assert other not in (first, fallback)  # another interpreter (a sweep cell) has its own
    with reserved_temp_dir("custom-op/cpu", "/venv/bin/python", fallback) as again:
        assert again == first


def _start_sequence(plan: list[PlannedRun], jobs: int, expected: dict[str, float] | None) -> list[str]:
    started: list[str] = []
    lock = threading.Lock()

    def heard(run: PlannedRun) -> None:
        with lock:
            started.append(run.run_id)

    results = run_plan(plan, jobs=jobs, on_start=heard, expected=expected)
    assert [r.id for r in results] == [run.run_id for run in plan]  # results stay in plan order
    assert all(r.outcome is Outcome.PASS for r in results)
    return started


def test_runs_expected_to_take_longest_start_first() -> None:
    """More runs than jobs: runs with no learned duration first (later stages first among them), then the
    longest expected; with one job, the plan's own order (prerequisites first)."""
    plan = [
        PlannedRun(_invocation("passes.py", name, Device.CPU, stage=stage), (), None)
        for name, stage in (("short", 3), ("long", 3), ("new-early", 1), ("new-late", 4))
    ]
    expected = {"short/cpu": 1.0, "long/cpu": 9.0}
    # With two jobs, the first two start together and the others as slots free: on_start is called in order.
    assert _start_sequence(plan, 2, expected) == ["new-late/cpu", "new-early/cpu", "long/cpu", "short/cpu"]
    first_run = _start_sequence(plan, 2, None)  # nothing learned yet (a first run): later stages first
    assert first_run == ["new-late/cpu", "short/cpu", "long/cpu", "new-early/cpu"]
    assert _start_sequence(plan, 1, expected) == [run.run_id for run in plan]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reserved folders and learned durations of these tests go to a cache folder of their own."""
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(tmp_path / "cache"))


PASSES_CATALOG = '[[probe]]\nid = "passes"\nscript = "passes.py"\ntitle = "passes"\ndevices = ["cpu"]\n'


def _pyc_names(folder: Path) -> set[str]:
    return {path.name.split(".")[0] for path in folder.rglob("*.pyc")} if folder.exists() else set()


def test_probes_keep_bytecode_in_the_cache_where_the_environment_turns_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PYTHONDONTWRITEBYTECODE (set by many container images, whose packages then have no .pyc) made every probe
    compile every module it imports, torch included: the probes keep bytecode in gpudoctor's cache instead, and
    nothing is written into the probes' (or any installed package's) folder."""
    probes = synthetic_copy(tmp_path, PASSES_CATALOG)
    for stale in probes.rglob("__pycache__"):
        shutil.rmtree(stale)
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(cache))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    spec = ProbeSpec(id="passes", script="passes.py", title="passes", devices=(Device.CPU,), details=("answer",))
    result = run_probe(ProbeInvocation(spec, Device.CPU, sys.executable, probes, 60))
    assert result.outcome is Outcome.PASS
    # The probe's own modules (and the harness) were compiled once, under the cache, mirroring their paths.
    kept = cache / "pycache"
    assert {"_use_harness", "_harness", "_protocol"} <= _pyc_names(kept), sorted(_pyc_names(kept))
    assert any(str(probes).lstrip("/") in str(path) for path in kept.rglob("_use_harness*.pyc"))
    assert not list(probes.rglob("__pycache__")), "bytecode was written into the probes' folder"

    # A prefix the user chose is theirs: the environment is left exactly as it is (so here nothing is written).
    shutil.rmtree(cache)
    mine = tmp_path / "mine"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(mine))
    result = run_probe(ProbeInvocation(spec, Device.CPU, sys.executable, probes, 60))
    assert result.outcome is Outcome.PASS
    assert not _pyc_names(cache / "pycache") and not _pyc_names(mine)


def test_probe_environment_changes_only_what_is_unset() -> None:
    from gpudoctor.suite.caches import probe_environment

    plain = probe_environment({"PATH": "/usr/bin", "TORCHINDUCTOR_CACHE_DIR": "/mine"})
    assert plain["TORCHINDUCTOR_CACHE_DIR"] == "/mine"
    assert plain["MODULAR_MAX_ENABLE_MODEL_IR_CACHE"] == "1"
    assert "PYTHONPYCACHEPREFIX" not in plain and "PYTHONDONTWRITEBYTECODE" not in plain
    empty_flag = probe_environment({"PYTHONDONTWRITEBYTECODE": ""})  # Python reads "" as unset
    assert empty_flag["PYTHONDONTWRITEBYTECODE"] == "" and "PYTHONPYCACHEPREFIX" not in empty_flag
    off = probe_environment({"PYTHONDONTWRITEBYTECODE": "1"})
    assert "PYTHONDONTWRITEBYTECODE" not in off and off["PYTHONPYCACHEPREFIX"].endswith("/pycache")


def test_the_doctor_keeps_its_own_bytecode_where_the_environment_turns_it_off(tmp_path: Path) -> None:
    env = {**os.environ, "GPUDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    for _ in range(2):  # the second start reads what the first wrote
        completed = subprocess.run(
            [sys.executable, "-m", "gpudoctor", "--json", "--no-probes"],
            capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, check=False, timeout=120,
        )  # fmt: skip
        assert completed.returncode in (0, 1), completed.stderr
        validate_report(json.loads(completed.stdout))
    kept = _pyc_names(tmp_path / "cache" / "pycache")
    assert {"doctor", "inventory", "doctor_command", "text"} <= kept, sorted(kept)
    # and `python -B`, a choice made for one command, is left alone
    shutil.rmtree(tmp_path / "cache")
    env.pop("PYTHONDONTWRITEBYTECODE")
    completed = subprocess.run(
        [sys.executable, "-B", "-m", "gpudoctor", "--json", "--no-probes"],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, check=False, timeout=120,
    )  # fmt: skip
    assert completed.returncode in (0, 1), completed.stderr
    assert not _pyc_names(tmp_path / "cache" / "pycache")
