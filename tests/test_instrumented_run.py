"""`gpudoctor run` and the GPU's instruments, on this machine without a GPU: a failing command is not rerun (no
compute-sanitizer, no synchronous rerun is started), and the report says why in one notice; `--no-instruments` says
nothing. What the instruments say on a GPU is read from the H100's recordings (tests/fixtures/h100/faults) into the
same details and findings the report carries."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, run_cli

from gpudoctor.instruments.sanitizer import parse
from gpudoctor.protocol import ReproducerDetail
from gpudoctor.reproducer.instrumented import raising_line

FAULTS = TESTS / "fixtures" / "h100" / "faults"


def _failing(tmp_path: Path) -> Path:
    script = tmp_path / "prog.py"
    script.write_text("raise RuntimeError('CUDA error: an illegal memory access was encountered')\n")
    return script


def test_without_a_gpu_no_instrument_runs_and_the_report_says_why(tmp_path: Path) -> None:
    completed = run_cli("run", "--json", "--no-debugger", "--", sys.executable, str(_failing(tmp_path)))
    assert completed.returncode == 1, completed.stderr
    report = json.loads(completed.stdout)
    (result,) = report["results"]
    assert ReproducerDetail.INSTRUMENTS not in result["details"]
    why = result["details"][ReproducerDetail.INSTRUMENTS_NOT_RUN]
    assert [line.split(":")[0] for line in why] == ["synchronous", "memcheck"]  # what a failure gets on a GPU
    assert all("no GPU here" in line for line in why)
    (notice,) = [f for f in report["findings"] if f["id"] == "gpu-instruments-not-run"]
    assert notice["severity"] == "notice" and notice["evidence"] == why
    assert "cuda-kernel-fault" in {f["id"] for f in report["findings"]}  # the text alone still names the class


def test_no_instruments_means_nothing_is_said_of_them(tmp_path: Path) -> None:
    completed = run_cli(
        "run", "--json", "--no-debugger", "--no-instruments", "--", sys.executable, str(_failing(tmp_path))
    )
    report = json.loads(completed.stdout)
    assert ReproducerDetail.INSTRUMENTS_NOT_RUN not in report["results"][0]["details"]
    assert not [f for f in report["findings"] if f["id"].startswith("gpu-instruments")]


def test_a_passing_command_is_never_rerun(tmp_path: Path) -> None:
    script = tmp_path / "fine.py"
    script.write_text("print('fine')\n")
    report = json.loads(run_cli("run", "--json", "--no-debugger", "--", sys.executable, str(script)).stdout)
    assert report["results"][0]["details"] == {}


def test_sanitize_asks_for_a_passing_command_too_and_says_why_none_ran_without_a_gpu(tmp_path: Path) -> None:
    """`gpudoctor run --sanitize`: a command that exits 0 is rerun under memcheck and initcheck on a GPU (a read out
    of bounds can print a plausible answer); here, without one, the report says so instead of staying silent."""
    script = tmp_path / "fine.py"
    script.write_text("print('fine')\n")
    completed = run_cli("run", "--json", "--no-debugger", "--sanitize", "--", sys.executable, str(script))
    report = json.loads(completed.stdout)
    assert completed.returncode == 0 and report["results"][0]["outcome"] == "pass"
    said = report["results"][0]["details"][ReproducerDetail.INSTRUMENTS_NOT_RUN]
    assert [line.split(":")[0] for line in said] == ["memcheck", "initcheck"]  # no synchronous rerun of a pass
    assert all("no GPU here" in line for line in said)
    assert "gpu-instruments-not-run" in {f["id"] for f in report["findings"]}
    both = run_cli("run", "--sanitize", "--no-instruments", "--", sys.executable, str(script))
    assert both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1 and "Traceback" not in both.stderr


def test_what_the_h100_instruments_said_becomes_the_reports_evidence() -> None:
    """The details a GPU run records, built from the recorded outputs as the rerun builds them."""
    own = frozenset({"triton_wrong_stride.py"})
    from gpudoctor.instruments.explain import summarise

    blocking = (FAULTS / "triton_wrong_stride" / "blocking.err").read_text()
    memcheck = (FAULTS / "triton_wrong_stride" / "memcheck.out").read_text()
    said = [
        {"instrument": "synchronous", "raised_at": raising_line(blocking, own)},
        {"instrument": "memcheck", "found": summarise(parse(memcheck), own)},
    ]
    lines = _located({ReproducerDetail.INSTRUMENTS: said})
    assert lines[0] == (
        "run synchronously (CUDA_LAUNCH_BLOCKING=1) it raises at triton_wrong_stride.py:19: "
        "`scale_rows[(x.shape[0],)](x, out, x.shape[1], x.numel(), 2.0, BLOCK=1024)`"
    )
    assert lines[1].startswith("compute-sanitizer memcheck: kernel `scale_rows` (triton_wrong_stride.py:14) writes")


RUNS = TESTS / "fixtures" / "h100" / "runs"
# program -> what the instruments' evidence must name (recorded by scripts/record_gpu_runs.sh on the H100)
NAMED = {
    "triton_wrong_stride": [
        "raises at triton_wrong_stride.py:19: `scale_rows[",
        "kernel `scale_rows` (triton_wrong_stride.py:14) writes 16 bytes of global memory out of bounds (thread",
        "launched at triton_wrong_stride.py:19",
    ],
    "cupy_no_bounds": ["raises at cupy_no_bounds.py:19", "kernel `saxpy` reads 4 bytes of global memory out of bounds"],
    "torch_index_assert": ["raises at torch_index_assert.py:7: `emb = table[ids]`", "a device-side assert fired"],
    "ext_too_many_threads": [
        "the CUDA call cudaLaunchKernel failed with cudaErrorInvalidValue (invalid argument) in add_one_kernel, "
        "launched at ext_too_many_threads.py:30"
    ],
    "cupy_too_much_shared": ["cuLaunchKernel failed with CUDA_ERROR_INVALID_VALUE", "cupy_too_much_shared.py:18"],
    "torch_oom": ["cudaMalloc failed with cudaErrorMemoryAllocation (out of memory)", "torch_oom.py:4"],
}


def _recorded(program: str) -> Any:
    from gpudoctor.report.codec import decode

    return decode(json.loads((RUNS / f"{program}.json").read_text()))


@pytest.mark.parametrize("program", sorted(NAMED))
def test_on_the_h100_run_names_kernel_line_and_access_for_each_failing_program(program: str) -> None:
    from gpudoctor.knowledge import match_findings

    report = _recorded(program)
    (located,) = [f for f in report.findings if f.id == "gpu-instruments-located-the-fault"]
    evidence = "\n".join(located.evidence)
    for words in NAMED[program]:
        assert words in evidence, evidence
    # the recording read again through today's knowledge names the same
    assert "gpu-instruments-located-the-fault" in {f.id for f in match_findings(report)}
    result = report.result("reproducer")
    assert result is not None
    assert {s["instrument"] for s in result.details[ReproducerDetail.INSTRUMENTS]} == {"synchronous", "memcheck"}
    # by difference: gpudoctor's own kernels for the same stack pass beside it on the same GPU
    (verdict,) = [f for f in report.findings if f.id == "gpu-fault-is-the-programs-not-the-stacks"]
    controls = [r for r in report.results if r.id != "reproducer"]
    assert controls and all(r.outcome.value == "pass" and r.device.value == "cuda" for r in controls)
    assert set(verdict.runs) == {r.id for r in controls}


def test_the_silent_programs_pass_plainly_and_are_not_rerun() -> None:
    # a read past the input that prints a plausible answer and a write one past the output both exit 0: `run`
    # reruns failures only (the H100 recordings in tests/fixtures/h100/faults show memcheck catching both)
    for program in ("triton_silent_oob_read", "numba_oob_write"):
        (result,) = _recorded(program).results
        assert result.outcome.value == "pass" and ReproducerDetail.INSTRUMENTS not in result.details


# program -> what `gpudoctor run --sanitize` named in it on the H100, though it exited 0 with a plausible answer
SANITIZED = {
    "triton_silent_oob_read": [
        "compute-sanitizer memcheck: kernel `add_bias` (triton_silent_oob_read.py:12) reads 8 bytes of global memory "
        "out of bounds (thread (116,0,0) of block (3,0,0), 1 bytes after the nearest allocation, which holds 4,000 "
        "bytes), launched at triton_silent_oob_read.py:19",
    ],
    "numba_oob_write": [  # recorded with numpy 2.4.6: the image's numpy 2.5.2 breaks numba-cuda 0.30.4 (below)
        "compute-sanitizer memcheck: kernel `__main__::shift_right` writes 4 bytes of global memory out of bounds "
        "(thread (255,0,0) of block (3,0,0), 1 bytes after the nearest allocation, which holds 4,096 bytes), "
        "launched at numba_oob_write.py:15",
    ],
    "mojo_oob_read": [  # the Mojo op through CustomOpLibrary: the kernel MAX generated for its foreach
        "compute-sanitizer memcheck: kernel `mogg_for_each_r2_w4_b256_gs_False_825399b6` reads 4 bytes of global "
        "memory out of bounds (thread (64,0,0) of block (8,0,0), 240 bytes before the nearest allocation",
        "compute-sanitizer initcheck: kernel `mogg_for_each_r2_w4_b256_gs_False_825399b6` reads memory nothing wrote",
    ],
}


@pytest.mark.parametrize("program", sorted(SANITIZED))
def test_on_the_h100_run_sanitize_names_the_silent_programs_access_and_the_controls_verdict(program: str) -> None:
    """`gpudoctor run --sanitize` (scripts/record_gpu_runs.sh with SANITIZE=1): the command exits 0, memcheck and
    initcheck rerun it anyway and name the kernel, thread, access and distance; gpudoctor's own kernels for the stacks
    it loaded pass beside it, so the verdict is the program's. Read through today's knowledge."""
    from gpudoctor.knowledge import match_findings

    report = _recorded(f"{program}-sanitize")
    command = report.result("reproducer")
    assert command is not None and command.outcome.value == "pass"
    assert {s["instrument"] for s in command.details[ReproducerDetail.INSTRUMENTS]} == {"memcheck", "initcheck"}
    findings = {f.id: f for f in match_findings(report)}
    evidence = "\n".join(findings["gpu-instruments-located-the-fault"].evidence)
    for words in SANITIZED[program]:
        assert words in evidence, evidence
    verdict = findings["gpu-fault-is-the-programs-not-the-stacks"]
    beside = [r for r in report.results if r.id != "reproducer"]  # with what they build on (max-import: no device)
    assert beside and all(r.outcome.value == "pass" for r in beside)
    assert set(verdict.runs) == {r.id for r in beside if r.device.value == "cuda"}
    wanted = {"triton_silent_oob_read": "triton/cuda", "mojo_oob_read": "custom-op/cuda", "numba_oob_write":
              "numba-cuda/cuda"}[program]  # fmt: skip
    assert wanted in verdict.runs


def test_on_the_h100_a_mojo_op_that_faults_is_named_by_its_call_its_kernel_and_access_and_not_blamed_on_max() -> None:
    """tests/faulty_programs/mojo_fault.py (a Mojo op through CustomOpLibrary reading through a pointer taken from its
    output) under `gpudoctor run` on the H100: the synchronous rerun, with MAX's own switches, raises at the line that
    called the op; memcheck names the kernel MAX made of its foreach, the access and how far it fell; gpudoctor's
    custom op and the other stacks' controls pass beside it, so the verdict is the program's, and MAX's known
    illegal-address failure on another GPU is not said."""
    from gpudoctor.knowledge import match_findings

    report = _recorded("mojo_fault")
    command = report.result("reproducer")
    assert (
        command is not None and command.outcome.value == "fail" and "CUDA_ERROR_ILLEGAL_ADDRESS" in command.stderr_tail
    )
    findings = {f.id: f for f in match_findings(report)}
    evidence = "\n".join(findings["gpu-instruments-located-the-fault"].evidence)
    assert (
        "run synchronously (CUDA_LAUNCH_BLOCKING=1) it raises at mojo_fault.py:16: `ops.add_into(out, x)`" in evidence
    )
    assert (
        "kernel `mogg_for_each_r2_w4_b256_gs_False_5e8f825b` (the kernel MAX made of a custom op's `foreach` closure) "
        "reads 8 bytes of global memory out of bounds (thread (0,0,0) of block (0,0,0), 234,591,457 bytes after the "
        "nearest allocation"
    ) in evidence
    assert "custom-op/cuda" in findings["gpu-fault-is-the-programs-not-the-stacks"].runs
    assert "max-cuda-illegal-address" not in findings and "cuda-kernel-fault-mojo" in findings


def test_on_the_h100s_image_numpy_2_5_broke_numba_cuda_and_run_says_which_name_and_who_asked() -> None:
    """The same numba program on the GPU machine as it came (numpy 2.5.2, numba-cuda 0.30.4): numba-cuda fails before
    any kernel runs, and gpudoctor's own numba probe fails beside it the same way, so the verdict is the stack's; the
    environment lookup names the missing name, where numpy keeps it now, and which package asked for it."""
    from gpudoctor.knowledge import match_findings

    report = _recorded("numba_oob_write-numpy2.5")
    findings = {f.id: f for f in match_findings(report)}
    assert "gpu-fault-is-the-programs-not-the-stacks" not in findings
    assert findings["gpu-fault-in-the-stack-too"].runs == ("numba-cuda/cuda",)
    located = findings["missing-name-located"]
    assert located.title.startswith("module 'numpy' has no attribute 'row_stack': numpy 2.5.2 has it in numpy.ma")
    evidence = "\n".join(located.evidence)
    assert "numba-cuda 0.30.4 asked for it (numba_cuda/numba/cuda/np/arrayobj.py:6860)" in evidence
    assert set(located.runs) == {"reproducer", "numba-cuda/cuda"}


def test_the_control_beside_a_failing_program_is_chosen_from_what_it_loaded() -> None:
    """Which of gpudoctor's own probes run beside the failing command on a GPU: the stacks its mapped libraries show
    (recorded on the H100), torch's own kernels when nothing more specific was loaded."""
    from gpudoctor.reproducer.controls import controls_for

    chosen = {program: controls_for(_recorded(program).results[0]) for program in NAMED}  # the command's result
    assert chosen == {
        "triton_wrong_stride": ["triton"],
        "cupy_no_bounds": ["cupy"],
        "cupy_too_much_shared": ["cupy"],
        "ext_too_many_threads": ["cpp-extension"],
        "torch_index_assert": ["torch-env"],
        "torch_oom": ["torch-env"],
    }


def _located(details: dict[str, Any], stderr: str = "") -> list[str]:
    """The evidence lines the report's predicates take from a command's instrument details (on the failing path)."""
    from gpudoctor.knowledge.checks.runs import located_causes
    from gpudoctor.model import Device, Outcome, ProbeResult, Report

    run = ProbeResult(id="reproducer", probe="reproducer", device=Device.NONE, outcome=Outcome.FAIL, duration_s=1.0,
                      summary="failed", stderr_tail=stderr, details=details)  # fmt: skip
    return [line for _, line in located_causes(Report("0", "", _h100_environment(), results=(run,)))]


def _h100_environment() -> Any:
    """The recorded H100's environment (it has a GPU): the reruns are planned as on that machine."""
    from gpudoctor.report.codec import decode

    return decode(json.loads((TESTS / "fixtures" / "h100-suite-report.json").read_text())).environment


def test_the_reruns_are_supervised_and_a_stop_during_one_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reruns' processes are the session's: stopped mid-rerun, the instruments say what had ended and nothing of
    the program is left. The GPU cannot run here, so the H100's recorded environment plans them, and a stand-in
    for compute-sanitizer (a script that runs the program it is given) takes the sanitizer's place on PATH."""
    import os
    import threading
    import time
    import uuid

    from gpudoctor.model import Device, Outcome, ProbeResult
    from gpudoctor.process.cancel import CancelScope
    from gpudoctor.reproducer.command import Reproducer
    from gpudoctor.reproducer.instrumented import rerun_with_instruments

    stand_in = tmp_path / "bin" / "compute-sanitizer"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/bin/sh\nshift 4\nexec "$@"\n')  # --tool X --print-limit N PROGRAM...
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in.parent}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    marker = uuid.uuid4().hex
    script = tmp_path / "hangs.py"
    script.write_text(f"import time, sys\nsys.argv.append('{marker}')\ntime.sleep(300)  # {marker}\n")
    reproducer = Reproducer(argv=(sys.executable, str(script), marker), cwd=tmp_path, timeout_s=120)
    failed = ProbeResult(id="reproducer", probe="reproducer", device=Device.NONE, outcome=Outcome.FAIL,
                         duration_s=1.0, summary="failed")  # fmt: skip
    scope = CancelScope()
    threading.Timer(2.0, scope.cancel, args=("stopped by the test",)).start()
    started = time.monotonic()
    result = rerun_with_instruments(reproducer, failed, _h100_environment(), scope)
    assert time.monotonic() - started < 30
    assert ReproducerDetail.INSTRUMENTS not in result.details  # the synchronous rerun was stopped: nothing said
    alive = [p for p in Path("/proc").iterdir() if p.name.isdigit() and marker.encode() in _cmdline(p)]
    assert alive == []


def _cmdline(process: Path) -> bytes:
    try:
        return (process / "cmdline").read_bytes()
    except OSError:
        return b""


def test_the_reruns_name_what_the_stand_in_sanitizer_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing program rerun synchronously (its raising line) and under the stand-in, whose output is the H100's
    recorded memcheck report: the details carry both, and the report's evidence says them."""
    import os

    from gpudoctor.model import Device, Outcome, ProbeResult
    from gpudoctor.reproducer.command import Reproducer
    from gpudoctor.reproducer.instrumented import rerun_with_instruments

    recorded = FAULTS / "triton_wrong_stride" / "memcheck.out"
    stand_in = tmp_path / "bin" / "compute-sanitizer"
    stand_in.parent.mkdir()
    stand_in.write_text(f'#!/bin/sh\nshift 4\n"$@"\nstatus=$?\ncat "{recorded}"\nexit $status\n')
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in.parent}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    script = tmp_path / "triton_wrong_stride.py"
    script.write_text("def launch():\n    raise RuntimeError('Triton Error [CUDA]: illegal address')\n\n\nlaunch()\n")
    illegal = "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered"
    failed = ProbeResult(id="reproducer", probe="reproducer", device=Device.NONE, outcome=Outcome.FAIL,
                         duration_s=1.0, summary="failed", stderr_tail=illegal)  # fmt: skip
    reproducer = Reproducer(argv=(sys.executable, str(script)), cwd=tmp_path, timeout_s=60)
    result = rerun_with_instruments(reproducer, failed, _h100_environment())
    assert result.details[ReproducerDetail.FAILURE_CLASS] == "memory-fault"
    lines = _located(result.details, result.stderr_tail or "")
    # the innermost line of the user's own file in the traceback
    assert lines[0] == (
        "run synchronously (CUDA_LAUNCH_BLOCKING=1) it raises at triton_wrong_stride.py:2: "
        "`raise RuntimeError('Triton Error [CUDA]: illegal address')`"
    )
    assert lines[1].startswith("compute-sanitizer memcheck: kernel `scale_rows` (triton_wrong_stride.py:14) writes")


def test_a_synchronous_rerun_that_raises_where_the_command_did_locates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that was never asynchronous (numba-cuda's AttributeError on the H100 image's numpy 2.5): the
    synchronous rerun raises on the same line and compute-sanitizer finds nothing, so no instrument located anything
    and the report does not say the GPU's instruments named where the program goes wrong. Real processes; a stand-in
    prints a clean sanitizer summary."""
    import os
    import subprocess

    from gpudoctor.model import Device, Outcome, ProbeResult
    from gpudoctor.reproducer.command import Reproducer
    from gpudoctor.reproducer.instrumented import rerun_with_instruments

    stand_in = tmp_path / "bin" / "compute-sanitizer"
    stand_in.parent.mkdir()
    stand_in.write_text('#!/bin/sh\nshift 4\n"$@"\nstatus=$?\necho "========= ERROR SUMMARY: 0 errors"\nexit $status\n')
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stand_in.parent}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    script = tmp_path / "prog.py"
    script.write_text("import types\nnp = types.SimpleNamespace()\n\n\nstacked = np.row_stack\n")
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert plain.returncode == 1 and "AttributeError" in plain.stderr
    failed = ProbeResult(id="reproducer", probe="reproducer", device=Device.NONE, outcome=Outcome.FAIL,
                         duration_s=1.0, summary="failed", stderr_tail=plain.stderr)  # fmt: skip
    reproducer = Reproducer(argv=(sys.executable, str(script)), cwd=tmp_path, timeout_s=60)
    # issue 44: a Python error whose words say nothing of CUDA is not rerun at all
    result = rerun_with_instruments(reproducer, failed, _h100_environment())
    assert result.details[ReproducerDetail.FAILURE_CLASS] == "python-error"
    assert ReproducerDetail.INSTRUMENTS not in result.details
    # one with CUDA's words is: rerun synchronously it raises on the same line, and memcheck finds nothing
    script.write_text(
        "import types\n\n\ndef sync():\n    raise RuntimeError('CUDA error: unknown error')\n\n\nsync()\n"
    )
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    failed = ProbeResult(id="reproducer", probe="reproducer", device=Device.NONE, outcome=Outcome.FAIL,
                         duration_s=1.0, summary="failed", stderr_tail=plain.stderr)  # fmt: skip
    result = rerun_with_instruments(reproducer, failed, _h100_environment())
    assert result.details[ReproducerDetail.FAILURE_CLASS] == "other"
    synchronous, memcheck = result.details[ReproducerDetail.INSTRUMENTS]
    assert synchronous["raised_at"] == "prog.py:5: `raise RuntimeError('CUDA error: unknown error')`"
    assert synchronous["raised_at_as_before"]
    assert memcheck["errors"] == 0
    assert _located(result.details, result.stderr_tail or "") == []
