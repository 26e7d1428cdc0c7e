"""Issue 50 on the GPU machine: the call checks' recordings replayed through the real codec and knowledge — each CuPy
argument mistake named with its parameter (H100), a transposed view given to a Mojo op named before MAX reads it
wrong (H100), a Triton launch with tensors on two GPUs (two H200s), and the layout-contract probe's GPU row."""

from __future__ import annotations

import json
import tomllib

from conftest import ROOT, validate_report

from gpudoctor.knowledge import load_knowledge, match_findings
from gpudoctor.model import Finding, Report
from gpudoctor.report.codec import decode

FIXTURES = ROOT / "tests" / "fixtures"


def _replayed(name: str) -> tuple[Report, dict[str, Finding]]:
    document = json.loads((FIXTURES / f"{name}.json").read_text())
    validate_report(document)
    report = decode(document)
    return report, {f.id: f for f in match_findings(report, load_knowledge())}


def _problems(findings: dict[str, Finding]) -> list[str]:
    return [i for i, f in findings.items() if f.is_problem and i != "bytecode-never-cached"]


CUPY = [
    ("cupy_float_scalar", "a Python float (passed as a double) for `float s`", "cp.float32(s)", "out[1] = 0.0"),
    ("cupy_host_array", "a NumPy array (float32, host memory) for `float* x`", "cp.asarray(x)", "numpy.ndarray"),
    ("cupy_wrong_dtype", "an array of float64 for `float* x`", "x.astype(cp.float32)", "max error nan"),
]


def test_each_cupy_argument_mistake_is_named_with_its_parameter_and_nothing_else_is_a_problem() -> None:
    for name, said, fix, symptom in CUPY:
        report, findings = _replayed(f"h100/launches/{name}")
        run = report.result("reproducer")
        assert run is not None and symptom in (run.summary or ""), name  # how CuPy itself let it through or refused
        assert _problems(findings) == ["cupy-kernel-arguments-do-not-match-signature"], (name, _problems(findings))
        (evidence,) = findings["cupy-kernel-arguments-do-not-match-signature"].evidence
        assert said in evidence and fix in evidence, evidence
        # the sanitizers' silence backs the call's mismatch: said inside it, not as an answer of its own
        if "gpu-instruments-found-nothing" in findings:
            assert findings["gpu-instruments-found-nothing"].part_of == "cupy-kernel-arguments-do-not-match-signature"


def test_a_transposed_view_to_a_mojo_op_is_named_before_max_reads_it_wrong_on_cuda() -> None:
    report, findings = _replayed("h100/launches/layout_transposed_mojo")
    run = report.result("reproducer")
    # MAX 26.7 on the H100 read the transposed storage as if contiguous: the first row came back as 1, 2, 3, 4
    assert run is not None and "add_one gave [1.0, 2.0, 3.0, 4.0], expected [1.0, 65.0, 129.0, 193.0]" in run.summary
    assert _problems(findings) == ["custom-op-call-does-not-match-declaration"]
    evidence = findings["custom-op-call-does-not-match-declaration"].evidence[0]
    assert "passes `input` [64, 64] with strides (1, 64) (a transposed view)" in evidence
    assert "reads it as if contiguous on CUDA (wrong values, no error)" in evidence


def test_a_triton_launch_with_tensors_on_two_gpus_names_both() -> None:
    _report, findings = _replayed("h200x2-launches/triton_two_devices")
    assert _problems(findings) == ["triton-launch-tensors-on-other-devices"]
    first = findings["triton-launch-tensors-on-other-devices"].evidence[0]
    assert "passes `x_ptr` on cuda:0 and `w_ptr` on cuda:1" in first
    plain = (FIXTURES / "h200x2-launches" / "plain.txt").read_text()
    assert "Pointer argument (at 1) cannot be accessed from Triton (cpu tensor?)" in plain  # Triton's own words
    # the second launch (every tensor on cuda:1, current device cuda:0) ran without an error there: the check
    # no longer names it (tests/test_launch_checks.py), though this recording, made before, still holds its event
    assert "scaled 4096" in plain


def test_the_layout_contract_probe_on_the_h100_is_a_matrix_row() -> None:
    row = tomllib.loads((ROOT / "matrix" / "rows" / "h100-80gb-hbm3_torch-2.11.0_max-26.7.0_b06104ba11c9.toml")
                        .read_text())  # fmt: skip
    assert row["results"]["layout-contract/cpu"]["outcome"] == "pass"
    assert row["results"]["layout-contract/cuda"]["outcome"] == "fail"
    report, _ = _replayed("h100/launches/layout-contract-h100")
    cuda = report.result("layout-contract/cuda")
    assert cuda is not None and "misaligned address" in (cuda.summary or "")


def test_on_the_h100_max_reads_views_wrong_and_faults_on_one() -> None:
    """MAX 26.7 on CUDA: a custom op reads a transposed or sliced input and writes a transposed output as if
    contiguous (wrong values, no error); a graph_op reads a transposed input wrong and faults on a sliced one."""
    report, _findings = _replayed("h100/launches/layout-contract-h100")
    cuda = report.result("layout-contract/cuda")
    assert cuda is not None
    cases = cuda.details["cases"]
    does = {name: case["does"] for name, case in cases.items()}
    assert does["custom op, transposed input"] == "reads wrong" and does["custom op, sliced input"] == "reads wrong"
    assert does["custom op, transposed output"] == "writes wrong" and does["custom op, row-sliced input"] == "right"
    assert does["graph_op, transposed input"] == "reads wrong" and does["graph_op, sliced input"] == "faults"
    assert cuda.details["faulted_at"] == "graph_op, sliced input"
    assert cases["custom op, transposed input"]["got"][:4] == [2.0, 10.0, 18.0, 26.0]  # storage order, not x.t()'s
    cpu = report.result("layout-contract/cpu")
    assert cpu is not None and {c["does"] for c in cpu.details["cases"].values()} == {"refuses", "right"}
