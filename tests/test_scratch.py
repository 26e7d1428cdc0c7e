"""Scratch folders (gpudoctor.process.scratch): held while in use, removed after, and the ones a run killed outright
(SIGKILL: a Ray node removed, an OOM kill) removed by a later run once nobody holds them. Real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpudoctor.process.scratch import HELD_BY, remove_abandoned, scratch_folder

HOLDS_THEN = """
import os, signal, sys, time
from gpudoctor.process.scratch import scratch_folder
with scratch_folder() as folder:
    (folder / "result.jsonl").write_text("{}")
    print(folder, flush=True)
    if sys.argv[1] == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(float(sys.argv[2]))
"""


def _start(tmp_path: Path, how: str, seconds: float = 0.0) -> tuple[subprocess.Popen[str], Path]:
    child = subprocess.Popen([sys.executable, "-c", HOLDS_THEN, how, str(seconds)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(tmp_path)})  # fmt: skip
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def test_a_folder_is_removed_after_use_and_one_killed_with_sigkill_by_the_next_run(tmp_path: Path) -> None:
    done, used = _start(tmp_path, "returns")
    assert done.wait(timeout=60) == 0 and not used.exists()
    killed, left = _start(tmp_path, "killed")
    assert killed.wait(timeout=60) == -signal.SIGKILL
    assert (left / "result.jsonl").is_file()  # SIGKILL: nothing of the process ran after it
    assert remove_abandoned(tmp_path, setting_up_s=0) == [left] and not left.exists()


def test_a_folder_in_use_a_young_one_and_someone_elses_are_left_alone(tmp_path: Path) -> None:
    holder, held = _start(tmp_path, "sleeps", 30)
    try:
        abandoned = tmp_path / "gpudoctor-young"  # unheld, but maybe its maker has not taken its lock yet
        abandoned.mkdir()
        (abandoned / HELD_BY).touch()
        other = tmp_path / "gpudoctor-of-another-program"  # no lock file: not one of these folders
        other.mkdir()
        old = time.time() - 3600
        os.utime(other, (old, old))
        assert remove_abandoned(tmp_path) == []
        assert held.exists() and abandoned.exists() and other.exists()
        assert remove_abandoned(tmp_path, setting_up_s=0) == [abandoned]
        assert held.exists() and other.exists()
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert remove_abandoned(tmp_path, setting_up_s=0) == [held]  # its holder died: the lock went with it


def test_a_folder_made_in_process_is_the_callers_until_the_block_ends(tmp_path: Path) -> None:
    with scratch_folder(prefix="gpudoctor-test-") as folder:
        assert folder.is_dir() and (folder / HELD_BY).is_file()
        assert folder not in remove_abandoned(folder.parent, setting_up_s=0)
    assert not folder.exists()
