"""One way to stop: a cancel scope per session. Real probes that hang, stopped by the library, by SIGINT and
SIGTERM sent to a real doctor process, with what had finished kept and no process of the run left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import MARKER_ENV, hanging_catalog, processes_with_marker, validate_report

from gpudoctor.doctor import DoctorOptions, diagnose
from gpudoctor.model import Outcome
from gpudoctor.process.cancel import CancelScope
from gpudoctor.report.codec import encode


def _wait_for(condition: object, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_a_cancelled_scope_kills_its_groups_and_its_childrens() -> None:
    session = CancelScope()
    child = session.child()
    sleepers = [subprocess.Popen(["sleep", "600"], start_new_session=True) for _ in range(2)]
    with session.owning(sleepers[0].pid), child.owning(sleepers[1].pid):
        session.cancel("test")
        codes = [p.wait(timeout=10) for p in sleepers]
    assert codes == [-signal.SIGKILL, -signal.SIGKILL]
    assert child.cancelled and child.reason == "test"
    late = session.child()  # a run started after the stop is stopped at once
    assert late.cancelled
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    with late.owning(sleeper.pid):
        assert sleeper.wait(timeout=10) == -signal.SIGKILL


def test_diagnose_stopped_midway_keeps_what_ended_and_leaves_no_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER_ENV, marker)
    probes = hanging_catalog(tmp_path)
    session = CancelScope()
    ended: list[str] = []

    def stop_once_hanging() -> None:
        _wait_for(lambda: "passes/cpu" in ended and processes_with_marker(marker))
        time.sleep(0.3)  # the hanging probe is well into its sleep
        session.cancel("stopped by the test")

    stopper = threading.Thread(target=stop_once_hanging)
    stopper.start()
    report = diagnose(DoctorOptions(probe_dir=probes, jobs=3), on_result=lambda r: ended.append(r.id), cancel=session)
    stopper.join()
    outcomes = {r.id: r.outcome for r in report.results}
    assert outcomes["passes/cpu"] is Outcome.PASS  # finished before the stop: kept
    assert outcomes["hangs"] is Outcome.INTERRUPTED  # killed, not timed out (its timeout is 600 s)
    assert outcomes["after-hang/cpu"] is Outcome.INTERRUPTED  # ran ahead of the hang, or never started
    assert report.result("hangs").summary == "interrupted: stopped by the test"  # type: ignore[union-attr]
    assert report.interrupted
    assert processes_with_marker(marker) == []
    validate_report(encode(report))


STOP_LIMIT_S = 3.0  # the benchmark (benchmarks/bench_stop.py) shows ~0.1 s; this only catches "waited for probes"


@pytest.mark.parametrize(
    ("sig", "target", "times", "output"),
    [
        (signal.SIGINT, "process", 1, "--json"),
        (signal.SIGTERM, "process", 1, "--json"),
        (signal.SIGINT, "group", 1, "--plain"),  # Ctrl-C on a terminal signals the whole foreground group
        (signal.SIGTERM, "group", 1, "--markdown"),  # as CI runners stop a job
        (signal.SIGINT, "process", 2, "--json"),  # an impatient second Ctrl-C
    ],
    ids=["int-process-json", "term-process-json", "int-group-plain", "term-group-markdown", "int-twice-json"],
)
def test_a_signal_to_the_doctor_stops_every_probe_at_once_and_prints_what_ended(
    tmp_path: Path, sig: int, target: str, times: int, output: str
) -> None:
    marker = uuid.uuid4().hex
    probes = hanging_catalog(tmp_path)
    env = {**os.environ, MARKER_ENV: marker, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    doctor = subprocess.Popen(
        [sys.executable, "-m", "gpudoctor", output, "--probes", str(probes), "--jobs", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,  # a group of its own, as a shell gives a foreground job
    )
    try:
        _wait_for(lambda: any(pid != doctor.pid for pid in processes_with_marker(marker)))
        time.sleep(1.0)  # the hanging probe (a grandchild of this test) is well into its sleep
        sent = time.monotonic()
        for _ in range(times):
            if target == "group":
                os.killpg(doctor.pid, sig)
            else:
                doctor.send_signal(sig)
            time.sleep(0.05)
        doctor.wait(timeout=60)
        took = time.monotonic() - sent - 0.05 * times
        stdout, stderr = doctor.communicate(timeout=60)
    finally:
        if doctor.poll() is None:
            doctor.kill()
    code = 128 + sig
    assert doctor.returncode == code, stderr
    assert took < STOP_LIMIT_S, took
    assert processes_with_marker(marker) == []
    assert list((tmp_path / "tmp").iterdir()) == []  # no scratch folder of a probe left behind
    assert f"stopped by {signal.Signals(sig).name}" in stderr
    if output == "--json":
        document = json.loads(stdout)
        validate_report(document)
        outcomes = {r["id"]: r["outcome"] for r in document["results"]}
        assert outcomes["hangs"] == "interrupted"
        assert outcomes["passes/cpu"] == "pass"
    elif output == "--plain":
        assert "interrupted hangs" in stdout and "pass     passes/cpu" in stdout
    else:
        assert "| hangs | interrupted |" in stdout and "| passes/cpu | pass |" in stdout


def test_a_signal_to_gpudoctor_kernel_stops_the_real_max_run(tmp_path: Path) -> None:
    """`gpudoctor kernel` on a real Mojo package with real MAX: stopped while it compiles, it exits 130 with a
    valid JSON report of what had ended, and no process of the run survives."""
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER_ENV: marker}
    kernel = Path(__file__).resolve().parent / "kernels" / "cpu_zeros"
    doctor = subprocess.Popen(
        [sys.executable, "-m", "gpudoctor", "kernel", str(kernel), "--op", "double", "--shape", "4x4", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        _wait_for(lambda: len([p for p in processes_with_marker(marker) if p != doctor.pid]) >= 1)
        time.sleep(2.0)  # its probes are importing torch and MAX, compiling the package
        sent = time.monotonic()
        doctor.send_signal(signal.SIGINT)
        doctor.wait(timeout=60)
        took = time.monotonic() - sent
        stdout, stderr = doctor.communicate(timeout=60)
    finally:
        if doctor.poll() is None:
            doctor.kill()
    assert doctor.returncode == 130, stderr
    assert took < STOP_LIMIT_S, took
    assert processes_with_marker(marker) == []
    document = json.loads(stdout)
    validate_report(document)
    assert "interrupted" in {r["outcome"] for r in document["results"]}
