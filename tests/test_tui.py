"""The Textual TUI, driven by Pilot against real CPU probes and synthetic probes that really crash and hang,
and once in a real terminal (tmux)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    MARKER_ENV,
    ROOT,
    SYNTHETIC,
    hanging_catalog,
    processes_with_marker,
    run_cli,
    synthetic_copy,
    validate_report,
)

from gpudoctor.doctor import DoctorOptions
from gpudoctor.model import Outcome
from gpudoctor.tui import DoctorApp

MARKUP_PROBE = """
from _harness import run_probe


def main(ctx):
    ctx.step("print [bold red]markup[/] and \\x1b[2J escapes")
    raise RuntimeError("[bold red]not markup[/] \\x1b[2Jstill text [/]")


run_probe("markup", main, devices=())
"""

CATALOG = """
[[probe]]
id = "torch-env"
script = "torch_env.py"
title = "torch imports, sees the device and runs one tiny op"
stage = 1
devices = ["cpu", "cuda"]
needs = ["torch"]

[[probe]]
id = "segfaults"
script = "segfaults.py"
title = "reads address 0"
stage = 1

[[probe]]
id = "markup"
script = "markup.py"
title = "[bold]a title with markup[/bold]"
stage = 1

[[probe]]
id = "hangs"
script = "hangs.py"
title = "sleeps forever"
stage = 2
timeout_s = 2
"""


@pytest.fixture
def mixed_probes(tmp_path: Path) -> Path:
    """The real probe scripts (torch-env runs for real) beside synthetic ones that segfault and hang."""
    probes = tmp_path / "probes"
    shutil.copytree(ROOT / "probes", probes)
    for name in ("segfaults", "hangs"):
        text = (SYNTHETIC / f"{name}.py").read_text().replace("import _use_harness  # noqa: F401\n", "")
        (probes / f"{name}.py").write_text(text)
    (probes / "markup.py").write_text(MARKUP_PROBE)
    (probes / "catalog.toml").write_text(CATALOG)
    return probes


async def _wait_for_report(app: DoctorApp, pilot: object, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while app.report is None:
        assert time.monotonic() < deadline, "the run did not finish"
        await pilot.pause(0.1)  # type: ignore[attr-defined]


async def _select(app: DoctorApp, pilot: object, run_id: str) -> None:
    for _ in range(20):
        if app.selected_run_id() == run_id:
            return
        await pilot.press("down")  # type: ignore[attr-defined]
    raise AssertionError(f"could not select {run_id}")


def test_run_select_a_crash_read_its_frames_export_and_contribute(mixed_probes: Path, tmp_path: Path) -> None:
    asyncio.run(_run_select_export_contribute(mixed_probes, tmp_path))


async def _run_select_export_contribute(mixed_probes: Path, tmp_path: Path) -> None:
    exports, matrix = tmp_path / "exports", tmp_path / "matrix"
    app = DoctorApp(DoctorOptions(probe_dir=mixed_probes, jobs=4), export_dir=exports, matrix_dir=matrix)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.5)
        # While probes run, the UI answers: the table is already there, with live status.
        assert app.query_one("#probes").row_count == 5
        await _wait_for_report(app, pilot)
        assert app.report is not None
        outcomes = {r.id: r.outcome for r in app.report.results}
        assert outcomes == {
            "torch-env/cpu": Outcome.PASS,
            "torch-env/cuda": Outcome.SKIPPED,
            "segfaults": Outcome.CRASH,
            "markup": Outcome.FAIL,
            "hangs": Outcome.TIMEOUT,
        }
        await _select(app, pilot, "segfaults")
        details = app.details_text("segfaults").plain
        assert "CRASH" in details and "SIGSEGV" in details and "read address 0" in details
        assert "Python frames (innermost first):" in details and "segfaults.py" in details
        assert "reproduce:" in details and "segfaults.py" in details

        await pilot.press("j")
        await pilot.press("m")
        report = json.loads((exports / "gpudoctor-report.json").read_text())
        validate_report(report)
        assert {r["id"]: r["outcome"] for r in report["results"]}["segfaults"] == "crash"
        assert "### segfaults: CRASH" in (exports / "gpudoctor-report.md").read_text()

        await pilot.press("c")  # contribute: writes the row file and says where
        (row,) = (matrix / "rows").glob("*.toml")
        assert app.last_written == row
        assert 'outcome = "crash"' in row.read_text() and 'signal = "SIGSEGV"' in row.read_text()
        assert str(row) in str(app.query_one("#status").render())

        await pilot.press("r")  # rerun the selected (crashing) probe: it crashes again, the report follows
        await pilot.pause(0.2)
        deadline = time.monotonic() + 30
        while app.running:
            assert time.monotonic() < deadline
            await pilot.pause(0.1)
        assert app.results["segfaults"].outcome is Outcome.CRASH
        await pilot.press("q")


def test_text_from_probes_is_shown_never_interpreted(mixed_probes: Path, tmp_path: Path) -> None:
    asyncio.run(_markup_stays_text(mixed_probes, tmp_path))


async def _markup_stays_text(mixed_probes: Path, tmp_path: Path) -> None:
    options = DoctorOptions(probe_dir=mixed_probes, only=("markup",))
    app = DoctorApp(options, export_dir=tmp_path, matrix_dir=tmp_path / "none")
    async with app.run_test(size=(140, 40)) as pilot:
        await _wait_for_report(app, pilot, 60)
        details = app.details_text("markup").plain
        assert "[bold red]not markup[/] \\x1b[2Jstill text [/]" in details  # literal, escape made visible
        assert "[bold]a title with markup[/bold]" in details
        assert "\x1b" not in details
        cell = app.query_one("#probes").get_row("markup")[4]  # type: ignore[attr-defined]
        assert cell.plain == "RuntimeError: [bold red]not markup[/] \\x1b[2Jstill text [/]"
        matrix_text = str(app.query_one("#matrix").render())
        assert "no matrix folder" in matrix_text or "no rows" in matrix_text


def test_not_a_terminal_gets_plain_text(mixed_probes: Path) -> None:
    completed = run_cli("--probes", str(mixed_probes), "--only", "segfaults")
    assert completed.returncode == 1
    assert completed.stdout.startswith("gpudoctor ") and "CRASH    segfaults" in completed.stdout
    assert "\x1b[" not in completed.stdout  # no terminal control from a TUI


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_smoke_in_a_real_terminal(mixed_probes: Path, tmp_path: Path) -> None:
    """80x24, the size of a default terminal: quitting must be visible there without resizing anything.

    A private tmux server (-L, no config file, TMUX unset) so a server or config already on the machine
    cannot change the window size under the test."""
    tmux = ["tmux", "-L", f"gpudoctor-test-{os.getpid()}-{time.monotonic_ns()}", "-f", os.devnull]
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    done = tmp_path / "exit-status"
    command = f"{sys.executable} -m gpudoctor --probes {mixed_probes} --jobs 4; echo $? > {done}"
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "smoke", "-x", "80", "-y", "24", "-c", str(tmp_path), command],
        check=True,
        env=env,
    )

    def tmux_out(*args: str) -> str:
        return subprocess.run([*tmux, *args], capture_output=True, text=True, check=True, env=env).stdout

    try:
        assert tmux_out("display-message", "-p", "-t", "smoke", "#{pane_width}x#{pane_height}").strip() == "80x24"
        screen = ""
        deadline = time.monotonic() + 120
        while "done:" not in screen:
            assert time.monotonic() < deadline, screen
            time.sleep(0.5)
            screen = tmux_out("capture-pane", "-p", "-t", "smoke")
        assert "gpudoctor" in screen and "NVIDIA driver" in screen and "no NVIDIA driver" in screen
        assert "CRASH" in screen and "segfaults" in screen and "TIMEOUT" in screen
        assert "q quit" in screen and "r rerun selected" in screen
        subprocess.run([*tmux, "send-keys", "-t", "smoke", "q"], check=True, env=env)
        deadline = time.monotonic() + 20
        while not done.exists():
            assert time.monotonic() < deadline, "q did not quit"
            time.sleep(0.2)
        assert done.read_text().strip() == "1"  # problems found: exit status 1, as without the TUI
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False, env=env)


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
def test_quit_mid_run_leaves_no_probe_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    """`q` or Ctrl-C while a probe hangs (its timeout is 600 s): the app exits at once with 130, kills the
    probe, and keeps what had ended for the terminal."""
    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER_ENV, marker)
    asyncio.run(_quit_mid_run(hanging_catalog(tmp_path), tmp_path, marker, key))
    assert processes_with_marker(marker) == []


async def _until_hanging(app: DoctorApp, pilot: object, marker: str) -> None:
    """Until the hanging probe runs: the app has heard it start and its process exists."""
    deadline = time.monotonic() + 60
    while "hangs" not in app.started or not processes_with_marker(marker):
        assert time.monotonic() < deadline, "the hanging probe never started"
        await pilot.pause(0.1)  # type: ignore[attr-defined]


async def _quit_mid_run(probes: Path, tmp_path: Path, marker: str, key: str) -> None:
    app = DoctorApp(DoctorOptions(probe_dir=probes, jobs=3), export_dir=tmp_path, matrix_dir=tmp_path / "none")
    async with app.run_test(size=(120, 40)) as pilot:
        await _until_hanging(app, pilot, marker)
        deadline = time.monotonic() + 60
        while "passes/cpu" not in app.results:  # its result is on its way to the app
            assert time.monotonic() < deadline
            await pilot.pause(0.1)
        assert app.running and app.report is None
        await pilot.press(key)
    assert app.return_value == 130
    assert app.session.scope.cancelled and app.session.reason == "quit"
    assert app.kept is not None
    kept = {r.id: r.outcome for r in app.kept.results}
    assert kept["passes/cpu"] is Outcome.PASS and kept["hangs"] is Outcome.INTERRUPTED


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("key", ["q", "C-c"])
def test_quit_mid_run_in_a_real_terminal_is_instant_and_keeps_what_ended(tmp_path: Path, key: str) -> None:
    """In tmux: the TUI runs a probe that hangs; `q` (or Ctrl-C, a key in the TUI's raw terminal) exits 130 at
    once, every probe process is gone, and the runs that had ended are printed on the terminal."""
    marker = uuid.uuid4().hex
    probes = hanging_catalog(tmp_path)
    tmux = ["tmux", "-L", f"gpudoctor-test-{os.getpid()}-{time.monotonic_ns()}", "-f", os.devnull]
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    done = tmp_path / "exit-status"
    command = (
        f"env {MARKER_ENV}={marker} {sys.executable} -m gpudoctor --probes {probes} --jobs 3; "
        f"echo $? > {done}.tmp; mv {done}.tmp {done}; sleep 600"
    )
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "quit", "-x", "120", "-y", "50", "-c", str(tmp_path), command],
        check=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while len(processes_with_marker(marker)) < 2:  # the doctor and its hanging probe
            assert time.monotonic() < deadline, "the hanging probe never started"
            time.sleep(0.2)
        time.sleep(1.0)
        sent = time.monotonic()
        subprocess.run([*tmux, "send-keys", "-t", "quit", key], check=True, env=env)
        while not done.exists():
            assert time.monotonic() < sent + 20, f"{key} did not quit"
            time.sleep(0.02)
        took = time.monotonic() - sent
        assert done.read_text().strip() == "130"
        assert took < 3.0, took  # bench_stop.py measures it; this only catches "waited for the probe"
        assert processes_with_marker(marker) == []
        screen = subprocess.run(
            [*tmux, "capture-pane", "-p", "-t", "quit", "-S", "-50"], capture_output=True, text=True, env=env
        ).stdout
        assert "interrupted hangs" in screen and "passes/cpu" in screen, screen
        assert "gpudoctor: quit; kept the runs that had ended" in screen, screen
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False, env=env)


def test_cancelling_the_worker_stops_its_probes_and_shows_what_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER_ENV, marker)
    asyncio.run(_cancel_worker(hanging_catalog(tmp_path), tmp_path, marker))


async def _cancel_worker(probes: Path, tmp_path: Path, marker: str) -> None:
    app = DoctorApp(DoctorOptions(probe_dir=probes, jobs=3), export_dir=tmp_path, matrix_dir=tmp_path / "none")
    async with app.run_test(size=(120, 40)) as pilot:
        await _until_hanging(app, pilot, marker)
        app.workers.cancel_group(app, "run")
        await _wait_for_report(app, pilot, 30)
        assert processes_with_marker(marker) == []
        assert app.report is not None and app.report.interrupted
        assert app.results["hangs"].outcome is Outcome.INTERRUPTED
        assert "interrupted" in str(app.query_one("#probes").get_row("hangs")[1])  # type: ignore[attr-defined]
        await pilot.press("q")


def test_your_own_crashing_command_in_the_app(tmp_path: Path) -> None:
    """`gpudoctor run --tui`: the real segfaulting reproducer (tests/reproducers) in the doctor's app — its row,
    its stacks (Python and, with gdb, native) in the details pane, and the report exported as every face has it."""
    asyncio.run(_own_command(tmp_path))


async def _own_command(tmp_path: Path) -> None:
    from gpudoctor.reproducer.command import Reproducer
    from gpudoctor.reproducer.subject import UserCommand

    reproducer = Reproducer(("python", str(ROOT / "tests" / "reproducers" / "segfault_in_thread.py")), timeout_s=120)
    app = DoctorApp(DoctorOptions(), export_dir=tmp_path, subject=UserCommand(reproducer))
    async with app.run_test(size=(160, 45)) as pilot:
        await _wait_for_report(app, pilot)
        assert app.report is not None and [r.outcome for r in app.report.results] == [Outcome.CRASH]
        assert app.query_one("#probes").row_count == 1
        await _select(app, pilot, "reproducer")
        details = app.details_text("reproducer").plain
        assert "where it died:" in details and "Python, crashing thread:" in details
        assert "segfault_in_thread.py:11 in worker" in details
        assert ("native frames: a second run under gdb" in details) == (shutil.which("gdb") is not None)
        await pilot.press("m")
        assert "Where it died:" in (tmp_path / "gpudoctor-report.md").read_text()
        await pilot.press("q")


PATCH_CATALOG = """
[[probe]]
id = "max-import"
script = "lacks_float8.py"
title = "fails as torch 2.6 makes MAX's bridge fail"
stage = 1

[[probe]]
id = "after-import"
script = "passes.py"
title = "builds on max-import"
stage = 2
details = ["answer"]
after = ["max-import"]
"""


class _WatchedApp(DoctorApp):
    """The app, noting what its table holds for max-import each time a run starts or ends."""

    CSS_PATH = str(Path(sys.modules[DoctorApp.__module__].__file__ or "").with_name("doctor.tcss"))  # not beside tests

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starts: list[str] = []
        self.held: list[str] = []

    def on_run_started(self, message: Any) -> None:
        super().on_run_started(message)
        self.starts.append(message.run_id)

    def on_run_ended(self, message: Any) -> None:
        super().on_run_ended(message)
        if "max-import" in self.results:
            self.held.append(self.results["max-import"].summary)


def test_a_patch_rerun_shows_running_and_the_table_keeps_the_stack_as_it_is(tmp_path: Path) -> None:
    """max-import fails as torch 2.6 makes it fail: the app shows its rerun with the float8 patch running (a run of
    the same schedule), yet the table keeps the real failing result; what the failure skipped is carried on."""
    asyncio.run(_patch_rerun_in_the_table(tmp_path))


async def _patch_rerun_in_the_table(tmp_path: Path) -> None:
    probes = synthetic_copy(tmp_path, PATCH_CATALOG)
    options = DoctorOptions(probe_dir=probes, jobs=2, advice=False)
    app = _WatchedApp(options, export_dir=tmp_path, matrix_dir=tmp_path / "matrix")
    async with app.run_test(size=(160, 45)) as pilot:
        await _wait_for_report(app, pilot)
        assert app.starts.count("max-import") == 2 and app.starts.count("after-import") == 2
        assert app.held and all(held.startswith("AttributeError: ") for held in app.held), app.held
        carried = app.results["after-import"]
        assert carried.outcome is Outcome.PASS and carried.summary.startswith("with patch float8-e8m0fnu-alias: ")
        assert app.report is not None and app.report.result("max-import").outcome is Outcome.FAIL  # type: ignore[union-attr]


def test_a_pasted_log_in_the_app(tmp_path: Path) -> None:
    """`gpudoctor explain --tui FILE`: the log is the one run of its subject; the app shows its row, the log's error
    lines in the details pane and the finding the knowledge makes of them, and exports the report like every face."""
    asyncio.run(_pasted_log(tmp_path))


async def _pasted_log(tmp_path: Path) -> None:
    from gpudoctor.reproducer.pasted import PastedLog
    from gpudoctor.tui.widgets import findings_text

    log = (
        "step 3/4: tests\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\n'
        "    from max.torch import CustomOpLibrary\n"
        "ModuleNotFoundError: No module named 'max.torch'\n"
    )
    app = DoctorApp(DoctorOptions(), export_dir=tmp_path, subject=PastedLog(log, "ci.log"))
    async with app.run_test(size=(160, 45)) as pilot:
        await _wait_for_report(app, pilot)
        assert app.report is not None and [(r.id, r.outcome) for r in app.report.results] == [("log", Outcome.FAIL)]
        assert app.query_one("#probes").row_count == 1
        await _select(app, pilot, "log")
        details = app.details_text("log").plain
        assert "No module named 'max.torch'" in details
        shown = findings_text(app.report).plain
        assert "max.torch moved to max.experimental.torch" in shown
        (moved,) = [f for f in app.report.findings if f.id == "max-torch-moved"]
        assert moved.runs == ("log",)
        await pilot.press("m")
        assert "No module named 'max.torch'" in (tmp_path / "gpudoctor-report.md").read_text()
        await pilot.press("q")
