"""How long gpudoctor takes to stop when asked, and what it leaves behind: the time from the signal (or key) to
the doctor's exit, median of several runs, with the processes and scratch folders left (must be none).

Usage: python benchmarks/bench_stop.py [--runs N] [--delay S]

Each run starts the real default suite (real torch and MAX on this machine's CPU), waits ``--delay`` seconds so
probes are importing and compiling, then stops it: SIGINT or SIGTERM to the doctor's process or to its process
group, in plain and JSON mode, `gpudoctor kernel` on a test kernel, and `q` in the TUI inside tmux.
Goal (issue 15): exit within 0.5 s, with no process of the run and no temporary folder left.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = "GPUDOCTOR_BENCH_MARKER"


def _alive(marker: str) -> int:
    needle = f"{MARKER}={marker}".encode() + b"\0"
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if needle in (entry / "environ").read_bytes() + b"\0" and state != "Z":
                count += 1
        except OSError:
            continue
    return count


Sample = tuple[float, int, int, int]


def _signal_run(argv: list[str], sig: int, group: bool, delay: float) -> Sample:
    """(seconds from the signal to exit, exit status, processes left, scratch entries left)."""
    marker = uuid.uuid4().hex
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, MARKER: marker, "TMPDIR": scratch}
        doctor = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )  # fmt: skip
        time.sleep(delay)
        sent = time.perf_counter()
        if group:
            os.killpg(doctor.pid, sig)
        else:
            doctor.send_signal(sig)
        code = doctor.wait()
        took = time.perf_counter() - sent
        time.sleep(0.2)  # anything the doctor left would still be there now
        return took, code, _alive(marker), len(os.listdir(scratch))


def _tmux_quit(delay: float) -> Sample:
    marker = uuid.uuid4().hex
    tmux = ["tmux", "-L", f"gpudoctor-bench-{os.getpid()}", "-f", os.devnull]
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    with tempfile.TemporaryDirectory() as scratch:
        done = Path(scratch) / "status"
        command = (
            f"env {MARKER}={marker} TMPDIR={scratch} {sys.executable} -m gpudoctor; "
            f"echo $? > {done}.tmp; mv {done}.tmp {done}; sleep 600"
        )
        subprocess.run([*tmux, "new-session", "-d", "-s", "b", "-x", "120", "-y", "40", command], check=True, env=env)
        try:
            time.sleep(delay)
            sent = time.perf_counter()
            subprocess.run([*tmux, "send-keys", "-t", "b", "q"], check=True, env=env)
            while not done.exists():
                time.sleep(0.005)
            took = time.perf_counter() - sent
            time.sleep(0.2)
            left = [p for p in os.listdir(scratch) if not p.startswith("status")]
            return took, int(done.read_text()), _alive(marker), len(left)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True, check=False, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--delay", type=float, default=8.0, help="seconds into the run before stopping it")
    options = parser.parse_args()
    doctor = [sys.executable, "-m", "gpudoctor"]
    kernel = [*doctor, "kernel", str(ROOT / "tests" / "kernels" / "cpu_zeros"), "--op", "double", "--shape", "4x4"]
    delay = options.delay

    def stop(argv: list[str], sig: int, group: bool, after: float = delay) -> Callable[[], Sample]:
        return lambda: _signal_run(argv, sig, group, after)

    modes: list[tuple[str, Callable[[], Sample]]] = [
        ("SIGINT to the process, --plain", stop([*doctor, "--plain"], signal.SIGINT, False)),
        ("SIGINT to the group (Ctrl-C), --json", stop([*doctor, "--json"], signal.SIGINT, True)),
        ("SIGTERM to the process, --json", stop([*doctor, "--json"], signal.SIGTERM, False)),
        ("SIGTERM to the group, --markdown", stop([*doctor, "--markdown"], signal.SIGTERM, True)),
        ("SIGINT, gpudoctor kernel --json", stop([*kernel, "--json"], signal.SIGINT, False, delay / 2)),
    ]
    if shutil.which("tmux"):
        modes.append(("q in the TUI (tmux)", lambda: _tmux_quit(options.delay)))
    print(f"stop latency, {options.runs} runs each, stopped {options.delay:g} s into a real run (goal: <= 0.5 s)")
    print(f"{'how':<40} {'median':>8} {'max':>8}  exit  processes left  temp entries left")
    for name, run in modes:
        samples = [run() for _ in range(options.runs)]
        times = [s[0] for s in samples]
        codes = sorted({s[1] for s in samples})
        left = max(s[2] for s in samples)
        temp = max(s[3] for s in samples)
        print(
            f"{name:<40} {statistics.median(times):7.3f}s {max(times):7.3f}s  {','.join(map(str, codes)):<5} "
            f"{left:>14}  {temp:>17}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
