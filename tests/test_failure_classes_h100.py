"""Issue 44 on the H100: each program of tests/faulty_programs (written as users write them, two or more per class,
over torch, Triton, CuPy, cuda.core and a Mojo op) recorded under `gpudoctor run` by scripts/record_gpu_classes.sh,
replayed here through the real codec and the current knowledge. Each class gets its own experiment's finding and
fix, and no verdict blames what is not at fault: a library's handled start-up error, a program that never used CUDA,
a clean instrument."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, validate_report

from gpudoctor.instruments.triage import FailureClass, program_sources, triage
from gpudoctor.knowledge import load_knowledge, match_findings
from gpudoctor.model import Finding, Outcome, Report
from gpudoctor.report.codec import decode

RECORDED = ROOT / "tests" / "fixtures" / "h100" / "classes"
# Findings that blame the stack (MAX, a driver, a package) — never right for a program's own fault.
STACK_BLAME = {"max-cuda-illegal-address", "gpu-fault-in-the-stack-too", "torch-driver-too-old",
               "cuda-runtime-newer-than-driver", "control-kernel-fails-too"}  # fmt: skip


def _replayed(name: str) -> tuple[Report, dict[str, Finding]]:
    document = json.loads((RECORDED / f"{name}.json").read_text())
    validate_report(document)
    report = decode(document)
    return report, {f.id: f for f in match_findings(report, load_knowledge())}


def _problems(findings: dict[str, Finding]) -> set[str]:
    return {i for i, f in findings.items() if f.is_problem and i != "bytecode-never-cached"}


# program, the class triage gave it on the H100, the finding that answers it, and a word of that finding's fix
CLASSES = [
    ("race_cupy", "wrong-result", "gpu-race-located", "__syncthreads()"),
    ("race_cudacore", "wrong-result", "gpu-race-located", "__syncthreads()"),
    ("uninit_cupy", "wrong-result", "gpu-uninitialized-read-located", "zeros"),
    ("uninit_triton", "wrong-result", "gpu-uninitialized-read-located", "zeros"),
    ("misaligned_cupy", "memory-fault", "gpu-misaligned-access-located", "multiple of the element size"),
    ("misaligned_cudacore", "memory-fault", "gpu-misaligned-access-located", "multiple of the element size"),
    ("hang_cupy", "hang", "program-hangs-in-gpu-kernel", "volatile"),
    ("hang_cudacore", "hang", "program-hangs-in-gpu-kernel", "volatile"),
    ("hostcrash_cudabindings", "host-crash", "host-crashed-not-the-gpu", "argument"),
    ("hostcrash_mojo", "host-crash", "custom-op-call-does-not-match-declaration", "every tensor on the op's device"),
    ("hostptr_cudacore", "memory-fault", "kernel-launch-given-host-address", "copy_from"),
    ("fork_torch", "process-model", "cuda-initialised-before-fork", "spawn"),
    ("fork_cupy", "process-model", "cuda-initialised-before-fork", "spawn"),
    ("beforecuda_cudacore", "before-cuda", "cuda-core-experimental-removed", "from cuda.core import"),
    ("beforecuda_maxtorch", "before-cuda", "max-torch-moved", "max.experimental.torch"),
]


@pytest.mark.parametrize(("name", "failure_class", "finding", "in_fix"), CLASSES, ids=[c[0] for c in CLASSES])
def test_each_class_gets_its_experiment_and_its_own_fix(
    name: str, failure_class: str, finding: str, in_fix: str
) -> None:
    report, findings = _replayed(name)
    run = report.result("reproducer")
    assert run is not None and run.details.get("failure_class") == failure_class
    assert finding in findings and findings[finding].is_problem and in_fix in findings[finding].fix
    assert not _problems(findings) & STACK_BLAME, _problems(findings)
    assert report.problem_findings >= 1  # the finding that explains the failure is counted


def test_the_uninitialised_reads_are_named_by_kernel_and_line() -> None:
    _, findings = _replayed("uninit_triton")
    evidence = findings["gpu-uninitialized-read-located"].evidence[0]
    assert "kernel `scale_kernel` (uninit_triton.py:14) reads memory nothing wrote" in evidence
    assert "launched at uninit_triton.py:21" in evidence
    _, findings = _replayed("uninit_cupy")
    assert "kernel `row_mean` reads memory nothing wrote" in findings["gpu-uninitialized-read-located"].evidence[0]


def test_a_hang_is_examined_in_place_once_and_says_which_kernel() -> None:
    report, findings = _replayed("hang_cudacore")
    run = report.result("reproducer")
    assert run is not None and run.outcome is Outcome.TIMEOUT and "instruments" not in run.details
    evidence = findings["program-hangs-in-gpu-kernel"].evidence
    assert "kernel `wait_for_host` grid (1,1,1) block (32,1,1) active" in evidence[0]
    assert any(line.startswith("NVML at the deadline: GPU 0 ") and "% busy" in line for line in evidence)
    tally = (RECORDED / "tally-2026-11-27-a.txt").read_text()
    for line in tally.splitlines():
        if line.startswith("hang_"):  # --timeout 30: the whole run ends well within twice the program's limit
            assert float(line.rsplit("wall=", 1)[1].rstrip("s")) < 2 * 30, line


def test_the_races_are_named_by_racecheck_and_the_mojo_kernel_by_its_op() -> None:
    _, findings = _replayed("race_cupy")
    assert findings["gpu-race-located"].evidence[0] == (
        "compute-sanitizer racecheck: kernel `block_sum` races on shared memory: a read at block_sum+0x190 and a write "
        "at block_sum+0x130 by different threads with no barrier between them, 10,000,000 hazards"
    )
    _, findings = _replayed("mojo_oob_read-sanitize")  # memcheck names MAX's kernel; the report names the user's op
    evidence = findings["gpu-instruments-located-the-fault"].evidence[0]
    assert "`mogg_for_each_r2_w4_b256_gs_False_825399b6`" in evidence
    assert "op `add_bias` (tests/kernels/oob_read/add_bias.mojo:10), the only custom op the program calls" in evidence
    assert "custom-op-call-does-not-match-declaration" in findings  # issue 45: the call was named before it ran


def test_a_pointer_in_no_allocation_is_a_host_address_and_the_launch_check_names_it_first() -> None:
    _, findings = _replayed("hostptr_cudacore")
    assert "182,462,501,952 bytes before the nearest allocation" in findings["gpu-host-address-located"].evidence[0]
    assert "a host address (in [heap])" in findings["kernel-launch-given-host-address"].evidence[0]


def test_a_host_crash_in_a_custom_op_call_leads_with_the_argument() -> None:
    """The seeds' silent SIGSEGV: a GPU op called with its input on the CPU. memcheck is clean (the host crashed) and
    the call check, written before the call, names the argument; the controls pass beside it."""
    report, findings = _replayed("hostcrash_mojo")
    run = report.result("reproducer")
    assert run is not None and run.outcome is Outcome.CRASH and run.signal == "SIGSEGV"
    call = findings["custom-op-call-does-not-match-declaration"]
    assert "passes `output` on cuda:0 and `input` on cpu" in call.evidence[0]
    assert "host-crashed-not-the-gpu" in findings and not _problems(findings) & STACK_BLAME
    control = report.result("custom-op/cuda")
    assert control is not None and control.outcome is Outcome.PASS


def test_a_host_crash_is_told_from_a_gpu_fault_by_a_clean_memcheck() -> None:
    _, findings = _replayed("hostcrash_cudabindings")
    evidence = findings["host-crashed-not-the-gpu"].evidence
    assert evidence[0] == "the process died of SIGSEGV"
    assert evidence[1].startswith("compute-sanitizer memcheck over the same program: 0 errors on the GPU")
    assert "libcuda.so.1" in evidence[2]  # cuda-gdb's native frames (the GPU machines have no gdb)
    assert evidence[3] == "Python was at hostcrash_cudabindings.py:21 in <module>"


def test_a_fork_after_cuda_is_confirmed_by_gpudoctors_own_probe_beside_it() -> None:
    for name in ("fork_torch", "fork_cupy"):
        report, findings = _replayed(name)
        probe = report.result("fork-after-init/cuda")
        assert probe is not None and probe.details.get("fork_start_method_safe") is False
        assert (
            "fork-after-init/cuda pass, fork_start_method_safe = False"
            in findings["cuda-initialised-before-fork"].evidence
        )


def test_no_recorded_program_is_blamed_on_the_stack() -> None:
    for path in sorted(RECORDED.glob("*.json")):
        _, findings = _replayed(path.stem)
        assert not _problems(findings) & STACK_BLAME, (path.stem, _problems(findings))


@pytest.mark.parametrize("name", ["benign_cudacore", "benign_cupy", "beforecuda_cudacore", "beforecuda_maxtorch"])
def test_no_verdict_from_noise(name: str) -> None:
    """A library's handled start-up error (cuda.core's CUDA_ERROR_INVALID_CONTEXT), a plain Python failure after
    correct GPU work, an import before CUDA: nothing says the GPU's instruments located a fault, nothing blames the
    stack, and nothing proposes rerunning the command under gpudoctor run."""
    report, findings = _replayed(name)
    assert "gpu-instruments-located-the-fault" not in findings
    assert not _problems(findings) & STACK_BLAME
    for finding in findings.values():
        assert "gpudoctor run --" not in " ".join(finding.evidence), finding.id
    run = report.result("reproducer")
    assert run is not None
    sources = program_sources([f"tests/faulty_programs/{name}.py"], ROOT)
    assert triage(run, sources) in (FailureClass.PYTHON_ERROR, FailureClass.BEFORE_CUDA)


def test_the_failing_programs_were_written_two_per_class_over_three_stacks_or_more() -> None:
    programs = sorted(p.stem for p in (ROOT / "tests" / "faulty_programs").glob("*_*.py"))
    classes = ("race", "uninit", "misaligned", "hang", "hostcrash", "fork", "beforecuda", "benign")
    per_class = {c: [p for p in programs if p.startswith(c + "_")] for c in classes}
    assert all(len(found) >= 2 for found in per_class.values()), per_class
    stacks = {p.split("_", 1)[1] for found in per_class.values() for p in found}
    assert {"torch", "triton", "cupy", "cudacore", "mojo"} <= stacks | {"torch"}, stacks
    assert Path(RECORDED / "tally-2026-11-27-a.txt").is_file()
