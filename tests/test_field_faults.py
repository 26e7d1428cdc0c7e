"""CUDA faults from public reports of every stack (tests/field_corpus/faults.toml, each with its source): each class
is recognised from the text alone and attributed to the stack that reported it — torch's "CUDA error", CuPy's
CUDARuntimeError, numba-cuda's CudaAPIError, PyCUDA's errors, Triton's "Triton Error [CUDA]", MAX's "CUDA call
failed" — never by a word the host shares (the negatives: host memory, a Python assert, an OS "invalid argument")."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from conftest import TESTS
from test_field_corpus import _toolchain_of, findings_for

FAULTS = tomllib.loads((TESTS / "field_corpus" / "faults.toml").read_text())["report"]
ENTRY = {
    "sticky-fault": "cuda-kernel-fault",
    "device-assert": "cuda-device-assert",
    "launch-config": "cuda-launch-configuration",
    "out-of-memory": "cuda-out-of-memory",
    "unsupported-ptx": "ptx-newer-than-driver",
}
# who may be named as having reported it (None: the text carries no stack's marks, and the finding says so)
REPORTERS = {
    "torch": {None, "torch"},
    "cupy": {None, "cupy"},
    "numba-cuda": {None, "numba"},
    "triton": {None, "triton"},
    "cuda-python": {None, "cuda-python"},
    "max-mojo": {None, "mojo"},
    "cpp-extension": {None, "torch", "cpp-extension"},  # an extension's kernel faults; torch reports it
}


@pytest.mark.parametrize("report", FAULTS, ids=[r["id"] for r in FAULTS])
def test_each_fault_is_recognised_and_attributed_to_the_stack_that_reported_it(report: dict[str, Any]) -> None:
    found = findings_for(report["quote"])
    if report["class"] == "negative":
        assert not {_toolchain_of(f)[0] for f in found} & set(ENTRY.values()), found
        return
    mine = {f for f in found if _toolchain_of(f)[0] == ENTRY[report["class"]]}
    if report.get("identifiable_from_text", True):
        assert mine, f"{report['id']}: found {sorted(found)}"
    assert {_toolchain_of(f)[1] for f in mine} <= REPORTERS[report["stack"]], sorted(mine)
    others = {_toolchain_of(f)[0] for f in found} & set(ENTRY.values()) - {ENTRY[report["class"]]}
    assert not others, f"{report['id']} also explained as {sorted(others)}"


def test_the_set_spans_every_stack_and_class() -> None:
    stacks = {r["stack"] for r in FAULTS}
    assert stacks == set(REPORTERS)
    assert {r["class"] for r in FAULTS} == {*ENTRY, "negative"}
    assert len(FAULTS) >= 40 and all(r["source"] and r["quote"].strip() for r in FAULTS)


RECORDED = TESTS / "fixtures" / "h100" / "faults"


@pytest.mark.parametrize(
    ("program", "mode", "expected"),
    [
        ("triton_wrong_stride", "plain", "cuda-kernel-fault-torch"),  # surfaces at torch.cuda.synchronize()
        ("triton_wrong_stride", "blocking", "cuda-kernel-fault-triton"),  # synchronous: Triton's launcher says it
        ("cupy_no_bounds", "plain", "cuda-kernel-fault-cupy"),
        ("numba_oob_write", "memcheck", "cuda-kernel-fault-numba"),  # plainly it exits 0; under memcheck it fails
        ("torch_index_assert", "plain", "cuda-device-assert-torch"),
        ("cupy_too_much_shared", "plain", "cuda-launch-configuration-cupy"),
        ("torch_oom", "plain", "cuda-out-of-memory-torch"),
    ],
)
def test_the_programs_recorded_on_the_h100_are_recognised_from_what_they_printed(
    program: str, mode: str, expected: str
) -> None:
    found = findings_for((RECORDED / program / f"{mode}.err").read_text())
    assert expected in found, sorted(found)


def test_a_launch_refused_inside_an_extension_is_not_guessed_from_torchs_later_invalid_argument() -> None:
    # torch only says "CUDA error: invalid argument" at the next call; which launch it was, the sanitizer tells
    found = findings_for((RECORDED / "ext_too_many_threads" / "plain.err").read_text())
    assert not {_toolchain_of(f)[0] for f in found} & set(ENTRY.values()), sorted(found)


@pytest.mark.parametrize(
    ("printed", "entry"),
    [
        # seed 000's script on MAX 26.2+: the bridge moved
        (
            '  File "repro.py", line 3, in <module>\n    from max.torch import CustomOpLibrary\n'
            "ModuleNotFoundError: No module named 'max.torch'",
            "max-torch-moved",
        ),
        ("AttributeError: module 'torch' has no attribute 'float8_e8m0fnu'", "torch-lacks-float8-e8m0fnu"),
        (
            "    ops = CustomOpLibrary(\"kernels\")\nAttributeError: 'str' object has no attribute 'is_file'",
            "custom-op-library-str-path",
        ),
        ("kernels/add.mojo:3:6: error: unable to locate module 'compiler'", "mojo1-kernel-migration"),
    ],
)
def test_every_api_move_the_knowledge_holds_is_known_from_what_a_users_program_prints(printed: str, entry: str) -> None:
    assert entry in findings_for(printed)


def test_the_second_held_out_set_is_kept_with_its_blind_judgement() -> None:
    """heldout2 (52 reports gathered blind) and how the rules did on it before anything was added: every report
    judged once, sources not shared with the other corpora."""
    heldout2 = tomllib.loads((TESTS / "field_corpus" / "heldout2.toml").read_text())["report"]
    blind = tomllib.loads((TESTS / "field_corpus" / "heldout2-blind.toml").read_text())
    assert len(heldout2) >= 40 and {r["id"] for r in heldout2} == set(blind)
    assert len({r["stack"] for r in heldout2}) >= 9
    counts = {verdict: list(blind.values()).count(verdict) for verdict in set(blind.values())}
    assert counts == {"right": 17, "misattributed": 2, "wrong-explanation": 2, "none": 31}
    others = {
        r["source"]
        for name in ("corpus.toml", "heldout.toml", "faults.toml")
        for r in tomllib.loads((TESTS / "field_corpus" / name).read_text())["report"]
    }
    assert not others & {r["source"] for r in heldout2}


def test_a_refused_launch_is_told_with_this_gpus_limits() -> None:
    """CuPy asking 512 KiB of shared memory on the H100 (recorded): the finding states the GPU's per-block limits."""
    import json

    from gpudoctor.knowledge import match_findings
    from gpudoctor.model import Device, Outcome, ProbeResult, Report
    from gpudoctor.report.codec import decode

    h100 = decode(json.loads((TESTS / "fixtures" / "h100-suite-report.json").read_text()))
    printed = (RECORDED / "cupy_too_much_shared" / "plain.err").read_text()
    run = ProbeResult(id="p", probe="p", device=Device.NONE, outcome=Outcome.FAIL, duration_s=1.0, summary="failed",
                      stderr_tail=printed)  # fmt: skip
    report = Report(doctor_version="0", created="", environment=h100.environment, results=(run,))
    (finding,) = [f for f in match_findings(report) if f.id == "cuda-launch-configuration-cupy"]
    assert "at most 1024 threads per block" in finding.explanation and "(up to: 227 KiB)" in finding.explanation
