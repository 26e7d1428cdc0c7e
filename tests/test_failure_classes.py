"""Every way a program fails gets its own experiment, and no verdict comes from noise (issue 44): the triage of a run's
ending into a class, the one table from class to experiments, what compute-sanitizer's racecheck and synccheck say
and its word for a program that never used CUDA, and — with real processes here — a hang examined once at its
deadline (never rerun), a debugger that hangs or floods bounded, a failing import counted as the problem it is, a
refused launch and a fork after CUDA named from their text. The GPU side is tested on the H100 recordings of
tests/faulty_programs in tests/test_failure_classes_h100.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli

from gpudoctor.instruments.reruns import Instrument
from gpudoctor.instruments.sanitizer import ErrorKind, parse
from gpudoctor.instruments.triage import EXPERIMENTS, FailureClass, experiments, triage
from gpudoctor.model import Device, Outcome, ProbeResult
from gpudoctor.reproducer import native
from gpudoctor.reproducer.command import Reproducer, run_command


def _failed(text: str, exception: str | None = None, outcome: Outcome = Outcome.FAIL, **kw: object) -> ProbeResult:
    return ProbeResult("reproducer", "reproducer", Device.NONE, outcome, 1.0, summary=text.splitlines()[-1],
                       stderr_tail=text, exception_type=exception, message=text.splitlines()[-1], **kw)  # type: ignore[arg-type]  # fmt: skip


RAW_KERNEL = 'import cupy as cp\nk = cp.RawKernel(r"""extern "C" __global__ void f() {}""", "f")\n'


@pytest.mark.parametrize(
    ("text", "exception", "sources", "expected"),
    [
        # FACTS 2026-11-27: torch's words for CUDA used in a parent, then fork workers that use it
        ("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must "
         "use the 'spawn' start method", "RuntimeError", [], FailureClass.PROCESS_MODEL),
        ("cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
         "encountered", "CUDADriverError", [], FailureClass.MEMORY_FAULT),
        ("RuntimeError: CUDA error: misaligned address", "RuntimeError", [], FailureClass.MEMORY_FAULT),
        ("RuntimeError: CUDA error: invalid argument", "RuntimeError", [], FailureClass.LAUNCH_REFUSED),
        ("ModuleNotFoundError: No module named 'cuda.core.experimental'", "ModuleNotFoundError", [],
         FailureClass.BEFORE_CUDA),
        ("AttributeError: module 'numpy' has no attribute 'row_stack'", "AttributeError", [], FailureClass.BEFORE_CUDA),
        ("AssertionError: sum 32640.0 != 130816.0", "AssertionError", [RAW_KERNEL], FailureClass.WRONG_RESULT),
        ("AssertionError: version 1.2 != 1.3", "AssertionError", ["import json\n"], FailureClass.PYTHON_ERROR),
        ("KeyError: 'batch_size'", "KeyError", [RAW_KERNEL], FailureClass.PYTHON_ERROR),
        ("RuntimeError: CUDA error: unknown error", "RuntimeError", [], FailureClass.OTHER),
    ],
)  # fmt: skip
def test_a_failure_is_triaged_by_its_own_words(
    text: str, exception: str, sources: list[str], expected: FailureClass
) -> None:
    assert triage(_failed(text, exception), sources) is expected


def test_a_crash_a_hang_and_a_pass_are_triaged_by_how_they_ended() -> None:
    crash = _failed("Fatal Python error: Segmentation fault", outcome=Outcome.CRASH, signal="SIGSEGV")
    assert triage(crash) is FailureClass.HOST_CRASH
    fault = _failed("CUDA_ERROR_ILLEGAL_ADDRESS\nFatal Python error: Aborted", outcome=Outcome.CRASH, signal="SIGABRT")
    assert triage(fault) is FailureClass.MEMORY_FAULT  # the GPU's words win over the host signal
    assert triage(_failed("no end after 60 s", outcome=Outcome.TIMEOUT)) is FailureClass.HANG
    assert triage(_failed("exited with status 0", outcome=Outcome.PASS)) is FailureClass.PASSED


def test_one_table_from_class_to_experiments() -> None:
    assert set(EXPERIMENTS) == set(FailureClass)
    assert EXPERIMENTS[FailureClass.HANG] == ()  # examined at its deadline, never rerun to hang again
    assert EXPERIMENTS[FailureClass.BEFORE_CUDA] == () and EXPERIMENTS[FailureClass.PYTHON_ERROR] == ()
    assert EXPERIMENTS[FailureClass.PROCESS_MODEL] == ()  # gpudoctor's fork probe beside it instead
    # first whether it is right when every launch waits (issue 49), then the sanitizer's tools
    assert EXPERIMENTS[FailureClass.WRONG_RESULT] == (
        Instrument.SYNCHRONOUS, Instrument.RACECHECK, Instrument.SYNCCHECK, Instrument.INITCHECK, Instrument.MEMCHECK,
    )  # fmt: skip
    assert EXPERIMENTS[FailureClass.HOST_CRASH] == (Instrument.MEMCHECK,)  # a clean memcheck says the host crashed
    # out of memory and no binary need no rerun: NVML's processes and the binaries' archs are read instead
    assert EXPERIMENTS[FailureClass.OUT_OF_MEMORY] == () and EXPERIMENTS[FailureClass.NO_BINARY] == ()
    # torch's stream sanitizer joins a torch program's wrong result (and `run --sanitize`), not other programs'
    torch_program = ["import torch\nx = torch.ones(4, device='cuda')\nassert x.sum() == 4\n"]
    assert experiments(FailureClass.WRONG_RESULT, torch_program)[-1] is Instrument.TORCH_STREAMS
    assert experiments(FailureClass.PASSED, torch_program)[-1] is Instrument.TORCH_STREAMS
    assert Instrument.TORCH_STREAMS not in experiments(FailureClass.WRONG_RESULT, ["import cupy as cp\n"])
    # torch's own tensors and no kernel of the program's: the synchronous rerun and torch's stream sanitizer only
    assert experiments(FailureClass.WRONG_RESULT, torch_program) == (Instrument.SYNCHRONOUS, Instrument.TORCH_STREAMS)
    own_kernel = ["import torch, triton\n@triton.jit\ndef k(x): pass\n"]
    assert experiments(FailureClass.WRONG_RESULT, own_kernel) == (*EXPERIMENTS[FailureClass.WRONG_RESULT],
                                                                  Instrument.TORCH_STREAMS)  # fmt: skip
    assert experiments(FailureClass.MEMORY_FAULT, torch_program) == EXPERIMENTS[FailureClass.MEMORY_FAULT]


def test_racecheck_synccheck_and_a_program_that_never_used_cuda_are_read() -> None:
    # FACTS 2026-11-27: racecheck on a CuPy block reduction without __syncthreads() (H100, compute-sanitizer 2025.3.1)
    race = parse(
        "========= COMPUTE-SANITIZER\n"
        "========= Error: Race reported between Read access at block_sum+0x1b0 and Write access at block_sum+0x1d0 "
        "[2088448 hazards]\n"
        "=========\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
    )
    (error,) = race.errors
    assert error.kind is ErrorKind.RACE and error.kernel == "block_sum" and error.hazards == 2088448
    assert error.race == ("read", "block_sum+0x1b0", "write", "block_sum+0x1d0") and race.error_count == 1
    sync = parse("========= Barrier error detected. Divergent thread(s) in warp\n=========     at f+0x80\n"
                 "========= ERROR SUMMARY: 1 error\n")  # fmt: skip
    assert sync.errors[0].kind is ErrorKind.SYNC and sync.errors[0].kernel == "f"
    never = parse("========= COMPUTE-SANITIZER\n========= Error: Target application terminated before first "
                  "instrumented API call\n========= ERROR SUMMARY: 0 errors\n")  # fmt: skip
    assert never.never_used_cuda and never.errors == () and never.error_count == 0


def test_a_hang_is_examined_once_at_its_deadline_and_never_rerun(tmp_path: Path) -> None:
    program = tmp_path / "waits.py"
    program.write_text("import threading\nprint('start', flush=True)\nthreading.Event().wait()\n")
    start = time.monotonic()
    completed = run_cli("run", "--json", "--timeout", "5", "--", sys.executable, str(program), timeout=120)
    took = time.monotonic() - start
    report = json.loads(completed.stdout)
    (run,) = report["results"]
    assert run["outcome"] == "timeout" and "instruments" not in run["details"]
    (finding,) = [f for f in report["findings"] if f["id"] == "program-hangs-on-host"]
    assert finding["severity"] == "problem" and "called from your waits.py:3 (<module>)" in finding["evidence"]
    assert took < 2 * 5 + 15, took  # the deadline, the dump's grace and the report: not a second hang


def _debugger(folder: Path, body: str) -> None:
    folder.mkdir(exist_ok=True)
    for name in ("cuda-gdb", "gdb"):
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)


@pytest.mark.parametrize("body", ["exec sleep 1000", "yes flooding the report"], ids=["hangs", "floods"])
def test_a_debugger_that_hangs_or_floods_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    _debugger(tmp_path / "bin", body)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(native, "GDB_TIMEOUT_S", 3.0)
    program = tmp_path / "waits.py"
    program.write_text("import time\ntime.sleep(1000)\n")
    start = time.monotonic()
    result = run_command(Reproducer((sys.executable, str(program)), cwd=tmp_path, timeout_s=3.0))
    assert result.outcome is Outcome.TIMEOUT and time.monotonic() - start < 30
    assert result.native is not None and "could not attach" in result.native.how
    assert len(result.native.how) < 300 and [f.line for f in result.frames][:1] == [2]  # faulthandler still spoke


def test_a_failing_import_is_the_problem_the_summary_counts(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text("from cuda.core.experimental import Device\n")
    completed = run_cli("run", "--json", "--", sys.executable, str(program), timeout=300)
    report = json.loads(completed.stdout)
    explaining = [f for f in report["findings"] if "reproducer" in f["runs"] and f["id"] != "not-a-known-failure"]
    assert explaining and all(f["severity"] == "problem" for f in explaining), explaining
    assert report["results"][0]["details"]["failure_class"] == "before-cuda"
    assert "instruments_not_run" not in report["results"][0]["details"]  # nothing on a GPU to run for an import


def _explain(tmp_path: Path, text: str) -> dict[str, object]:
    log = tmp_path / "job.log"
    log.write_text(text)
    completed = run_cli("explain", "--json", str(log), timeout=120)
    report: dict[str, object] = json.loads(completed.stdout)
    return report


def test_a_refused_launch_and_a_fork_after_cuda_are_named_from_their_text(tmp_path: Path) -> None:
    # torch's words for an extension's launch of 2048 threads (tests/faulty_programs/ext_too_many_threads.py)
    report = _explain(tmp_path, "Traceback (most recent call last):\n  File \"prog.py\", line 12, in <module>\n"
                                "RuntimeError: CUDA error: invalid argument\n")  # fmt: skip
    assert [f["id"] for f in report["findings"]] == ["cuda-call-invalid-argument"]  # type: ignore[index]
    # GeeeekExplorer/nano-vllm#22 (FIELD-REPORTS: fork-after-cuda-init)
    report = _explain(tmp_path, "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                                "multiprocessing, you must use the 'spawn' start method\n")  # fmt: skip
    (fork,) = [f for f in report["findings"] if f["id"] == "cuda-initialised-before-fork"]  # type: ignore[index]
    assert fork["severity"] == "problem" and "spawn" in fork["fix"]


def test_ctrl_c_during_the_attach_leaves_nothing_running(tmp_path: Path) -> None:
    """The hang's deadline reached, the debugger attached (one that never answers): Ctrl-C then stops gpudoctor at
    once, with the program and the debugger ended — nothing of the run survives."""
    from conftest import MARKER_ENV, processes_with_marker

    _debugger(tmp_path / "bin", "exec sleep 1000")
    program = tmp_path / "waits.py"
    program.write_text("import time\ntime.sleep(1000)\n")
    marker = __import__("uuid").uuid4().hex
    env = {**os.environ, MARKER_ENV: marker, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    doctor = subprocess.Popen([sys.executable, "-m", "gpudoctor", "run", "--json", "--timeout", "2", "--",
                               sys.executable, str(program)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
            "sleep 1000" in _cmdline(p) for p in processes_with_marker(marker)
        ):
            time.sleep(0.2)  # the fake debugger is attached (it runs with the run's marker)
        assert any("sleep 1000" in _cmdline(p) for p in processes_with_marker(marker))
        sent = time.monotonic()
        doctor.send_signal(signal.SIGINT)
        doctor.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if doctor.poll() is None:
            doctor.kill()
    assert doctor.returncode == 130 and took < 15, (doctor.returncode, took)
    assert processes_with_marker(marker) == []


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_the_h100s_own_racecheck_and_misaligned_reports_are_read() -> None:
    """compute-sanitizer 2025.3 on the H100 (tests/fixtures/h100/faults/*.out, raw): racecheck prints the race over
    several lines under a hazard-limit warning; memcheck says "is misaligned" on the line under its headline."""
    from conftest import ROOT

    from gpudoctor.instruments.explain import cause_kind

    faults = ROOT / "tests" / "fixtures" / "h100" / "faults"
    race = parse((faults / "racecheck-race_cupy.out").read_text())
    (error,) = race.errors
    assert error.kind is ErrorKind.RACE and error.race == ("read", "block_sum+0x190", "write", "block_sum+0x130")
    assert error.hazards == 10_000_000
    misaligned = parse((faults / "memcheck-misaligned_cupy.out").read_text())
    assert {cause_kind(e) for e in misaligned.errors} == {"misaligned"}
