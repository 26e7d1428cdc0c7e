"""`gpudoctor kernel` on correct kernels written as each release's published examples write them, and on kernels
with bugs that only the numbers show (issue 31): the static scan follows Mojo's real structure (nested functions
whose signatures span lines, capture lists, kernels launched with enqueue_function), 26.7's dtype shorthand is
read, an op that accumulates into its output is caught with one call, and a mismatch is explained by what the
numbers show. Real runs use this machine's MAX 26.7 on the CPU; the 25.x-26.1 styles are read by the scan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli

from gpudoctor.kernel.scan import scan_package

KERNELS = ROOT / "tests" / "kernels"
CONTROL = ROOT / "kernels" / "mojo1" / "control"


def test_the_scan_follows_multiline_signatures_closures_and_enqueue_function() -> None:
    legacy = {op.name: op for op in scan_package(KERNELS / "legacy_styles").ops}
    assert legacy["scale_rows"].host_indexing == ()  # foreach closure, parameters and signature over 6 lines
    assert legacy["row_max"].host_indexing == ()  # a kernel given to enqueue_function; the CPU loop under `else`
    (line,) = legacy["first_then_rest"].host_indexing  # after a multi-line closure: still host code
    assert (line.line, line.text) == (26, "output[0, 0] = input[0, 0]")
    (count_up,) = scan_package(KERNELS / "mojo1_styles").ops
    assert count_up.host_indexing == ()  # capture list `{input}` after a signature over 5 lines
    assert [(t.name, t.role, t.dtype) for t in count_up.tensors] == [("output", "output", "int32"),
                                                                    ("input", "input", "int32")]  # fmt: skip
    (seed000,) = scan_package(KERNELS / "host_indexing").ops
    assert [h.line for h in seed000.host_indexing] == [18]


def _kernel(package: Path, *args: str) -> dict[str, Any]:
    completed = run_cli("kernel", str(package), "--json", *args, timeout=600)
    assert completed.stdout, completed.stderr[-3000:]
    document: dict[str, Any] = json.loads(completed.stdout)
    return document


def _cpu(document: dict[str, Any]) -> dict[str, Any]:
    run: dict[str, Any] = next(r for r in document["results"] if r["id"] == "kernel/cpu")
    return run


def test_the_dtype_shorthand_builds_int32_tensors_and_the_op_passes() -> None:
    document = _kernel(KERNELS / "mojo1_styles", "--op", "count_up", "--shape", "4x4", "--reference", "x0 + 1")
    assert _cpu(document)["outcome"] == "pass", _cpu(document)["summary"]
    assert document["kernel"]["calls"][0]["outputs"][0]["dtype"] == "int32"
    assert not [f for f in document["findings"] if f["severity"] == "problem"]


def test_an_op_that_accumulates_into_its_output_is_caught_with_one_call() -> None:
    """MAX 26.7's CPU path gives the kernel a zeroed buffer of its own: one call of `output += input` gives the
    reference's answer; calling it again on the same inputs gives twice it."""
    document = _kernel(KERNELS / "accumulates", "--op", "copy_in", "--shape", "4x4", "--reference", "x0")
    run = _cpu(document)
    assert run["outcome"] == "fail" and run["details"].get("accumulates_into_output") is True
    assert "accumulates into its output" in run["summary"]
    finding = next(f for f in document["findings"] if f["id"] == "kernel-accumulates-into-output")
    assert "`=`" in finding["fix"] and "tolerance" not in finding["fix"]


@pytest.mark.parametrize(
    ("op", "params", "reference", "kind", "finding", "said"),
    [
        ("scale", ["--param", "factor=3"], "x0 * 2", "multiple", "kernel-output-is-a-multiple", "exactly 1.5 times"),
        ("add_one", [], "x0 + 2", "offset", "kernel-output-offset", "plus -1"),
        ("scale", ["--param", "factor=3"], "x0 * 3.003", "small", "kernel-differs-slightly", "only"),
    ],
)
def test_a_mismatch_is_explained_by_what_the_numbers_show(
    op: str, params: list[str], reference: str, kind: str, finding: str, said: str
) -> None:
    document = _kernel(CONTROL, "--op", op, *params, "--shape", "4x4", "--reference", reference)
    run = _cpu(document)
    assert run["outcome"] == "fail" and run["details"].get("mismatch") == kind and said in run["summary"]
    found = {f["id"]: f for f in document["findings"]}
    assert finding in found
    advice = " ".join(f["fix"] for f in document["findings"])
    assert ("rtol/atol" in advice) == (kind == "small")  # tolerance advice only for rounding-sized differences


def test_a_result_left_over_from_the_previous_call_is_named() -> None:
    """Recorded here with MAX 25.4 (a sweep cell): seed 002's default parameter — the second call, meant to take
    factor=2, gives the factor=3 call's result; the numbers say it is the previous call's output."""
    document = json.loads((ROOT / "tests" / "fixtures" / "kernel-stale-max25.4-cpu.json").read_text())
    run = _cpu(document)
    assert run["details"].get("mismatch") == "stale"
    assert "it equals the output of the previous call (scale[factor=3])" in run["summary"]
    assert "kernel-output-stale" in {f["id"] for f in document["findings"]}


H100 = ROOT / "tests" / "fixtures" / "h100" / "kernel-styles"


def test_on_the_h100_accumulation_is_the_cpu_paths_and_correct_kernels_raise_no_host_code_problem() -> None:
    """Recorded on the H100 (MAX 26.7, torch 2.11 cu130), one call per spec, 64x64: the accumulating op fails on
    the CPU with accumulation named and passes on CUDA (its GPU path writes); the 26.7-style op with the dtype
    shorthand and a multi-line capture closure passes on both with no host-code finding; an op whose CPU-only host
    code the scan cannot place passes on both against the reference, so the scan's finding is a notice."""
    accumulates = json.loads((H100 / "accumulates.json").read_text())
    runs = {r["id"]: r for r in accumulates["results"]}
    assert runs["kernel/cpu"]["details"].get("accumulates_into_output") is True
    assert runs["kernel/cuda"]["outcome"] == "pass"
    assert "kernel-accumulates-into-output" in {f["id"] for f in accumulates["findings"]}
    styles = json.loads((H100 / "mojo1_styles.json").read_text())
    assert {r["id"]: r["outcome"] for r in styles["results"]}["kernel/cuda"] == "pass"
    assert not [f for f in styles["findings"] if f["severity"] == "problem"]
    blind = json.loads((H100 / "scan_blind_spot.json").read_text())
    assert {f["id"]: f["severity"] for f in blind["findings"]}.get("host-code-indexes-device-tensor-contradicted") == (
        "notice"
    )
    assert "host-code-indexes-device-tensor" not in {f["id"] for f in blind["findings"]}
