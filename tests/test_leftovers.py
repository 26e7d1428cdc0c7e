"""Nothing a run starts outlives it: real programs that daemonize (setsid, a double fork) and leave a child in their
group, under `gpudoctor run` (it ends, it hangs past its limit, it is stopped with Ctrl-C) and under `gpudoctor
bisect`; afterwards no process of theirs is alive, and the report names what was ended. And several runs at once
never end each other's processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli, tiny_wheel, validate_report

from gpudoctor.process.cancel import CancelScope
from gpudoctor.process.leftovers import RUN_TOKEN_ENV, marked
from gpudoctor.process.supervise import supervise
from gpudoctor.reproducer.command import LEFT_RUNNING_DETAIL, LEFT_RUNNING_ISSUE

LEAVES = ROOT / "tests" / "reproducers" / "leaves_processes.py"


def _with_marker(marker: str) -> list[int]:
    """Live helpers (a Python that sleeps for 10 minutes) whose command line carries ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and b"import time; time.sleep(600)" in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _wait_for(condition: Any, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def _named(report: dict[str, Any]) -> dict[str, int]:
    """What the report says was left running: the helper's kind (the last word of its command) -> its pid; and the
    finding that says so names each one."""
    (result,) = report["results"]
    left = result["details"][LEFT_RUNNING_DETAIL]
    (finding,) = [f for f in report["findings"] if f["id"] == LEFT_RUNNING_ISSUE]
    assert finding["severity"] == "notice" and finding["runs"] == ["reproducer"]
    assert f"left {len(left)} process" in finding["title"] and "gpudoctor ended" in finding["title"]
    for process in left:
        assert any(f"(pid {process['pid']})" in line and process["command"] in line for line in finding["evidence"])
    return {p["command"].split()[-1]: p["pid"] for p in left}


def test_what_a_command_leaves_running_is_ended_and_named(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    completed = run_cli("run", "--json", "--no-debugger", "--", "python", str(LEAVES), "exit", marker)
    assert completed.returncode == 0, completed.stderr  # a notice: the command itself passed
    assert _with_marker(marker) == []
    report = json.loads(completed.stdout)
    validate_report(report)
    assert report["results"][0]["outcome"] == "pass"
    named = _named(report)
    assert set(named) == {"setsid", "double-fork", "in-group"}
    plain = run_cli("run", "--plain", "--no-debugger", "--", "python", str(LEAVES), "exit", marker)
    assert "Your command left 3 processes running; gpudoctor ended them" in plain.stdout
    assert f"{marker} double-fork` (pid " in plain.stdout
    assert _with_marker(marker) == []


def test_a_command_that_hangs_is_killed_with_its_group_and_what_escaped_it_is_named(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    completed = run_cli("run", "--json", "--no-debugger", "--timeout", "3", "--", "python", str(LEAVES), "hang", marker)
    assert completed.returncode == 1, completed.stderr
    assert _with_marker(marker) == []
    report = json.loads(completed.stdout)
    validate_report(report)
    assert report["results"][0]["outcome"] == "timeout"
    # the helper in its group ran with it and was killed with it; the two that had left the group are named
    assert set(_named(report)) == {"setsid", "double-fork"}


def test_ctrl_c_mid_run_leaves_nothing_running(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    doctor = subprocess.Popen(
        [sys.executable, "-m", "gpudoctor", "run", "--json", "--no-debugger", "--", "python", str(LEAVES), "hang",
         marker],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True,  # a group of its own, as a shell gives a foreground job: Ctrl-C goes to the group
    )  # fmt: skip
    try:
        _wait_for(lambda: len(_with_marker(marker)) == 3)
        sent = time.monotonic()
        os.killpg(doctor.pid, signal.SIGINT)
        stdout, stderr = doctor.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if doctor.poll() is None:
            doctor.kill()
    assert doctor.returncode == 130, stderr
    assert took < 5, took
    assert _with_marker(marker) == []
    report = json.loads(stdout)
    validate_report(report)
    assert report["results"][0]["outcome"] == "interrupted"
    assert set(_named(report)) == {"setsid", "double-fork"}


def test_a_bisect_ends_what_each_cell_left_running(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for version in ("90.3.0", "90.4.0", "90.5.0", "90.6.0"):
        tiny_wheel(wheelhouse, "max", version)
    envs = tmp_path / "envs"
    completed = run_cli(
        "bisect", "--max", "90.3..90.6", "--bad", "90.6.0", "--find-links", str(wheelhouse), "--offline",
        "--inherit", sys.executable, "--envs", str(envs), "--no-debugger", "--json",
        "--", "python", str(LEAVES), "release", marker, timeout=600,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr[-3000:]
    assert _with_marker(marker) == []
    bisect = json.loads(completed.stdout)
    changes = {(t["before"], t["after"]) for t in bisect["transitions"]}
    assert ("90.4.0", "90.5.0") in changes  # the notice does not change how a cell ended
    assert len(bisect["cells"]) >= 2
    for cell in bisect["cells"]:
        kept = json.loads((envs / cell["report"]).read_text())
        validate_report(kept)
        assert set(_named(kept)) == {"setsid", "double-fork", "in-group"}, cell["max"]


def _leave_a_daemon(marker: str) -> list[str]:
    code = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}], start_new_session=True)"
    )
    return [sys.executable, "-c", code]


def test_runs_at_once_end_only_their_own_leftovers() -> None:
    """Two runs at once, as --jobs and a sweep's cells run them: the one that ends first ends its own daemon and not
    the other's, which is still running; the other's end (here: a stop) ends that one."""
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    long_scope = CancelScope()
    ended: dict[str, Any] = {}
    long_argv = [*_leave_a_daemon(second)[:2], _leave_a_daemon(second)[2] + "; time.sleep(600)"]
    long_run = threading.Thread(target=lambda: ended.setdefault("long", supervise(long_argv, long_scope, 600)))
    long_run.start()
    try:
        _wait_for(lambda: len(_with_marker(second)) == 1)
        short = supervise(_leave_a_daemon(first), CancelScope(), 60)
        assert [p.command.split()[-1] for p in short.left_running] == [first]
        assert _with_marker(first) == []
        assert len(_with_marker(second)) == 1  # the other run's daemon lives on while its run lasts
    finally:
        long_scope.cancel("the test is done")
        long_run.join(timeout=60)
    assert [p.command.split()[-1] for p in ended["long"].left_running] == [second]
    assert _with_marker(second) == []


def test_each_run_carries_a_token_of_its_own_and_a_run_inside_a_run_carries_both(tmp_path: Path) -> None:
    scope = CancelScope()
    printed = [supervise([sys.executable, "-c", f"import os; print(os.environ[{RUN_TOKEN_ENV!r}])"], scope, 60)
               for _ in range(2)]  # fmt: skip
    tokens = {p.stdout.data.strip() for p in printed}
    assert len(tokens) == 2 and all(len(t) == 32 for t in tokens)
    assert RUN_TOKEN_ENV not in os.environ
    assert marked({RUN_TOKEN_ENV: "outer"}, "inner")[RUN_TOKEN_ENV] == "outer:inner"
    # A program that supervises a run of its own (gpudoctor under `gpudoctor run`), killed at its deadline: the
    # inner run's child is in a session of its own and its daemon in another, yet the outer run ends both.
    marker = uuid.uuid4().hex
    inner = [*_leave_a_daemon(marker)[:2], _leave_a_daemon(marker)[2] + "; time.sleep(600)"]
    outer = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'src')!r}); "
        "from gpudoctor.process.cancel import CancelScope; from gpudoctor.process.supervise import supervise; "
        f"supervise({inner!r}, CancelScope(), 600)"
    )
    ended = supervise([sys.executable, "-c", outer], scope, 3)
    assert ended.timed_out and _with_marker(marker) == []
    assert len(ended.left_running) == 2, ended.left_running
    assert not any(Path(f"/proc/{p.pid}").exists() and _alive(p.pid) for p in ended.left_running)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_run_cancelled_mid_way_ends_what_escaped_at_once() -> None:
    marker = uuid.uuid4().hex
    scope = CancelScope()
    argv = [*_leave_a_daemon(marker)[:2], _leave_a_daemon(marker)[2] + "; time.sleep(600)"]
    timer = threading.Timer(1.0, lambda: scope.cancel("stopped by the test"))
    timer.start()
    started = time.monotonic()
    ended = supervise(argv, scope, 600)
    assert ended.cancelled == "stopped by the test" and time.monotonic() - started < 5
    assert [p.command.split()[-1] for p in ended.left_running] == [marker]
    assert _with_marker(marker) == []
    with pytest.raises(Exception, match="stopped by the test"):
        ended.unless_cancelled()


def test_ctrl_c_mid_bisect_leaves_nothing_running(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for version in ("90.3.0", "90.4.0"):
        tiny_wheel(wheelhouse, "max", version)
    argv = ["bisect", "--max", "90.3..90.4", "--find-links", str(wheelhouse), "--offline", "--inherit", sys.executable,
            "--envs", str(tmp_path / "envs"), "--no-debugger", "--json",
            "--", "python", str(LEAVES), "hang", marker]  # fmt: skip
    doctor = subprocess.Popen(
        [sys.executable, "-m", "gpudoctor", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for(lambda: len(_with_marker(marker)) == 3, 300)
        os.killpg(doctor.pid, signal.SIGINT)
        stdout, stderr = doctor.communicate(timeout=60)
    finally:
        if doctor.poll() is None:
            doctor.kill()
    assert doctor.returncode == 130, stderr
    assert _with_marker(marker) == []
    assert json.loads(stdout)["interrupted"]


def _zombie_children() -> set[int]:
    zombies = set()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if entry.name.isdigit() and fields[0] == "Z" and int(fields[1]) == os.getpid():
                zombies.add(int(entry.name))
    return zombies


def test_what_escaped_and_ended_by_itself_during_the_run_is_reaped_too() -> None:
    """gpudoctor is the subreaper of what escapes a run: a helper that escapes and exits by itself while the run
    lasts becomes gpudoctor's child; it is reaped, not left a zombie."""
    before = _zombie_children()
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(0.5)'], start_new_session=True); "
            "time.sleep(0.1)")  # fmt: skip
    # the program's child starts the helper in a session of its own and exits: the helper is re-parented to
    # gpudoctor, then exits while the program still sleeps
    program = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {code!r}]); time.sleep(3)"
    ended = supervise([sys.executable, "-c", program], CancelScope(), 60)
    assert ended.returncode == 0 and ended.left_running == ()
    assert _zombie_children() - before == set()
