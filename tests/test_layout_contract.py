"""The layout contract of a Mojo custom op (issue 50): a view that is not contiguous row-major storage named before the
call, on every device, with what each MAX release does with it; ops.custom inside a graph_op checked as a call is; the
layout-contract probe's own answer on the CPU with real MAX; and a bool output never written caught whatever its
buffer held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from conftest import ROOT

from gpudoctor.calls.callsite import argument_source
from gpudoctor.calls.check import Kind, Mismatch, check_call
from gpudoctor.calls.contract import Contract, read_contracts
from gpudoctor.calls.graph_values import graph_tensor
from gpudoctor.calls.layout import layout_of, recorded, what_max_does

OPS = ROOT / "tests" / "call_checks" / "ops"
SITE = "prog.py:23"
REFUSED = "driver buffer's from_dlpack only accepts contiguous tensors"
MAX_ENV = {**os.environ, "MODULAR_MAX_ENABLE_MODEL_IR_CACHE": "1"}


class OnDevice:
    """A real tensor said to be on a CUDA GPU, which this machine has not."""

    def __init__(self, tensor: torch.Tensor, device: str) -> None:
        self.tensor, self.device = tensor, torch.device(device)
        self.dtype, self.shape = tensor.dtype, tensor.shape

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tensor, name)


def _contract() -> Contract:
    return read_contracts(OPS).contracts["plus_one"]


def _check(*args: Any) -> Mismatch | None:
    os.chdir(ROOT)
    return check_call(_contract(), args, {}, lambda: SITE)[0]


def test_each_view_is_named_with_its_strides_and_what_max_does_with_it() -> None:
    x, out = torch.arange(16.0).reshape(4, 4), torch.empty(4, 4)
    wide = torch.arange(24.0).reshape(4, 6)
    at = "tests/call_checks/ops/plus_one.mojo"
    cpu = (
        f': MAX 26.7 refuses it on the CPU ("{REFUSED}") and reads it as if contiguous on CUDA (wrong values, no error)'
    )
    said = {
        "transposed": _check(out, x.t()),
        "sliced": _check(out, wide[:, 1:5]),
        "expanded": _check(out, torch.arange(4.0).expand(4, 4)),
        "transposed on cuda": _check(OnDevice(out, "cuda:0"), OnDevice(x.t(), "cuda:0")),
        "transposed output": _check(out.t(), x),
    }
    assert {name: m.sentence if m else None for name, m in said.items()} == {
        "transposed": f"plus_one ({at}:16) reads its tensors as contiguous row-major storage; the call at {SITE} "
        f"passes `input` [4, 4] with strides (1, 4) (a transposed view){cpu} — pass `input.contiguous()`, a contiguous "
        "copy",
        "sliced": f"plus_one ({at}:16) reads its tensors as contiguous row-major storage; the call at {SITE} passes "
        f"`input` [4, 4] with strides (6, 1) from storage offset 1 (a sliced view){cpu} — pass `input.contiguous()`, a "
        "contiguous copy",
        "expanded": f"plus_one ({at}:16) reads its tensors as contiguous row-major storage; the call at {SITE} passes "
        f"`input` [4, 4] with strides (0, 1) (an expanded view){cpu} — pass `input.contiguous()`, a contiguous copy",
        "transposed on cuda": f"plus_one ({at}:16) reads its tensors as contiguous row-major storage; the call at "
        f"{SITE} passes `input` [4, 4] with strides (1, 4) (a transposed view): MAX 26.7 reads it as if contiguous on "
        "CUDA (wrong values, no error) — pass `input.contiguous()`, a contiguous copy",
        # an output view on CUDA, as the layout-contract probe recorded it on the H100 (2026-11-27)
        "transposed output": f"plus_one ({at}:15) reads its tensors as contiguous row-major storage; the call at "
        f'{SITE} passes `output` [4, 4] with strides (1, 4) (a transposed view): MAX 26.7 refuses it on the CPU ("'
        f'{REFUSED}") and writes it as if contiguous on CUDA (wrong values, no error) — pass a contiguous tensor as '
        "the output and copy it into the view after the call",
    }
    assert all(m is not None and m.kind is Kind.LAYOUT for m in said.values())
    # contiguous storage at an offset (a row slice) is what MAX reads right; one-element dims and empty tensors are
    # contiguous whatever their strides say
    assert _check(out, torch.arange(20.0).reshape(5, 4)[1:]) is None
    assert _check(out, x) is None
    assert layout_of(torch.ones(4, 1).expand(4, 1)) is None and layout_of(torch.ones(0, 4).t()) is None
    assert layout_of(torch.ones(2, 3, 4).permute(2, 0, 1)).view == "a permuted view"  # type: ignore[union-attr]


def test_what_max_does_follows_the_recorded_releases() -> None:
    assert recorded((25, 3), "cpu", "input") is None  # 25.3 has no CustomOpLibrary: nothing recorded
    assert recorded((26, 1), "cpu", "output") and recorded((26, 7), "cuda", "input")
    assert recorded((26, 6), "cuda", "input") is None  # only 26.7 was recorded on the H100
    assert (
        what_max_does("cuda", "output", (26, 7))
        == ": MAX 26.7 writes it as if contiguous on CUDA (wrong values, no error)"
    )
    assert what_max_does("cpu", "input", (25, 5)).startswith(": MAX 25.5 refuses it on the CPU")
    # MAX 25.4 takes the view on the CPU and reads (or writes) its storage as if contiguous (the matrix row)
    assert (
        what_max_does("cpu", "input", (25, 4))
        == ": MAX 25.4 reads it as if contiguous on the CPU (wrong values, no error)"
    )
    assert what_max_does("cpu", "output", (25, 4)) == (
        ": MAX 25.4 writes it as if contiguous on the CPU (wrong values, no error)"
    )


def test_a_tensor_that_cannot_say_its_layout_is_no_mismatch() -> None:
    class Stand:  # dtype, shape, device, data_ptr — no stride(): a duck-typed tensor of another library
        def __init__(self, tensor: torch.Tensor) -> None:
            self.dtype, self.shape, self.device, self.tensor = tensor.dtype, tensor.shape, tensor.device, tensor

        def data_ptr(self) -> int:
            return self.tensor.data_ptr()

        def is_contiguous(self) -> bool:
            return False

    assert layout_of(Stand(torch.ones(4, 4))) is None


def test_the_fix_quotes_the_programs_own_argument(tmp_path: Path) -> None:
    program = tmp_path / "prog.py"
    program.write_text(
        "import torch\n\nops.add_one(out, row.expand(4, 4))\nops.add_one(\n    out,\n    input=x.t(),\n)\n"
    )
    # the op's own call, not expand's (which takes two arguments too); a call over several lines; by keyword
    assert argument_source(str(program), 3, 1, None, 2, "add_one") == "row.expand(4, 4)"
    assert argument_source(str(program), 6, None, "input", 2, "add_one") == "x.t()"
    assert argument_source(str(program), 1, 0, None, 2, "add_one") is None
    (tmp_path / "broken.py").write_text("ops.add_one(out, x.t(\n")
    assert argument_source(str(tmp_path / "broken.py"), 1, 1, None, 2, "add_one") is None


def test_graph_values_read_as_tensors() -> None:
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    read = graph_tensor(TensorType(DType.float32, ["batch", 4], device=DeviceRef.GPU()))
    assert read is not None and read.shape == ("batch", 4) and str(read.device) == "cuda:0" and not read.static
    assert graph_tensor(object()) is None


def test_views_and_graph_custom_calls_on_real_max() -> None:
    """tests/call_checks/layout_views.py with the checks on (warn): each view is named before the call, and MAX 26.7
    on the CPU then refuses it; ops.custom inside a graph_op given float64 or rank 3 is named at the graph
    function's line, before MAX's "Failed to compile the model"; the correct calls say nothing."""
    startup = subprocess.run([sys.executable, "-m", "gpudoctor.calls"], capture_output=True, text=True, check=True)
    env = {**MAX_ENV, "PYTHONPATH": startup.stdout.strip(), "GPUDOCTOR_CALL_CHECKS": "warn"}
    completed = subprocess.run([sys.executable, "tests/call_checks/layout_views.py"], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=900)  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-2000:]
    said = {line["call"]: line for line in map(json.loads, completed.stdout.splitlines())}
    program = (ROOT / "tests" / "call_checks" / "layout_views.py").read_text().splitlines()

    def line_of(text: str) -> str:
        return f"tests/call_checks/layout_views.py:{next(n + 1 for n, line in enumerate(program) if text in line)}"

    for call, argument, strides in (("transposed", "x.t()", "(1, 4)"), ("sliced", "wide[:, 1:5]", "(6, 1)"),
                                    ("expanded", "row.expand(4, 4)", "(0, 1)")):  # fmt: skip
        sentence, key = said[call]["checked"], f'"{call}":'
        assert f"the call at {line_of(key)} passes `input` [4, 4] with strides {strides}" in sentence
        assert sentence.endswith(f"— pass `{argument}.contiguous()`") and REFUSED in sentence
        assert said[call]["max"].startswith(f"ValueError: {REFUSED}")
    assert said["row-sliced"] == {"call": "row-sliced", "checked": None, "max": "returned"}
    graph_line = [n + 1 for n, line in enumerate(program) if "graph_ops.custom(" in line]
    assert said["graph-float64"]["checked"] == (
        "plus_one (tests/call_checks/ops/plus_one.mojo:15) declares `output` float32 rank 2; the call at "
        f"tests/call_checks/layout_views.py:{graph_line[0]} passes float64 [4, 4]"
    )
    assert said["graph-rank3"]["checked"] == (
        "plus_one (tests/call_checks/ops/plus_one.mojo:15) declares `output` float32 rank 2; the call at "
        f"tests/call_checks/layout_views.py:{graph_line[1]} passes float32 [4, 4, 1]"
    )
    for call in ("graph-float64", "graph-rank3"):
        assert said[call]["max"].startswith("RuntimeError: Failed to compile the model"), said[call]
    assert said["graph-correct"] == {"call": "graph-correct", "checked": None, "max": "returned"}


def test_the_probe_says_what_this_max_does_on_the_cpu(tmp_path: Path) -> None:
    """The layout-contract probe on MAX 26.7's CPU: the custom op and the graph_op refuse the transposed and sliced
    inputs and the transposed output with MAX's own words, read the row slice right, and hand an op a buffer of MAX's
    own for its output (what an output never written reads: zeros, or what the memory held)."""
    results = tmp_path / "events.jsonl"
    completed = subprocess.run(
        [sys.executable, "probes/layout_contract.py", "--device", "cpu"],
        cwd=ROOT,
        env={**MAX_ENV, "GPUDOCTOR_RESULT_FILE": str(results)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    (result,) = [e for e in map(json.loads, results.read_text().splitlines()) if e["event"] == "result"]
    assert result["status"] == "pass", result
    cases, details = result["details"]["cases"], result["details"]
    for op in ("custom op", "graph_op"):
        for view in ("transposed input", "sliced input", "transposed output"):
            assert cases[f"{op}, {view}"]["does"] == "refuses" and REFUSED in cases[f"{op}, {view}"]["error"]
        assert cases[f"{op}, row-sliced input"]["does"] == "right"
    assert cases["custom op, transposed input"]["passes"] == "input [4, 4] strides (1, 4) offset 0 (not contiguous)"
    assert details["reads_wrong"] is False and details["wrong_cases"] == []
    assert details["output_buffer"] in ("max-zeroed", "max-uninitialised"), details
    assert result["summary"].startswith(
        "layout on cpu — custom op refuses transposed input + sliced input + transposed output, right row-sliced input;"
    )


def test_reads_wrong_on_cuda_is_a_stack_problem_named_with_its_releases() -> None:
    """A layout-contract/cuda run that read a view as contiguous (as MAX 26.7 does on the H100, FACTS 2026-11-27)
    becomes max-reads-strided-view-as-contiguous; the CPU's refusal is no finding."""
    import dataclasses

    from gpudoctor.knowledge import load_knowledge, match_findings
    from gpudoctor.model import Device, Outcome, ProbeResult
    from gpudoctor.report.codec import decode

    report = decode(json.loads((ROOT / "tests" / "fixtures" / "h100-suite-report.json").read_text()))
    wrong = ProbeResult(
        id="layout-contract/cuda",
        probe="layout-contract",
        device=Device.CUDA,
        outcome=Outcome.FAIL,
        duration_s=12.0,
        summary="MAX on cuda computes a wrong result, without an error, for custom op, transposed input (custom op, "
        "transposed input: got [1.0, 2.0, 3.0, 4.0], expected [1.0, 33.0, 65.0, 97.0])",
        details={"reads_wrong": True, "wrong_cases": ["custom op, transposed input"]},
    )
    refused = dataclasses.replace(wrong, id="layout-contract/cpu", device=Device.CPU, outcome=Outcome.PASS,
                                  summary="layout on cpu — custom op refuses transposed input",
                                  details={"reads_wrong": False})  # fmt: skip
    knowledge = load_knowledge()
    found = [f for f in match_findings(dataclasses.replace(report, results=(*report.results, wrong)), knowledge)
             if f.id == "max-reads-strided-view-as-contiguous"]  # fmt: skip
    assert len(found) == 1 and found[0].is_problem and "`x.t().contiguous()`" in found[0].fix
    assert "MAX 26.7 on CUDA" in found[0].explanation
    quiet = match_findings(dataclasses.replace(report, results=(*report.results, refused)), knowledge)
    assert "max-reads-strided-view-as-contiguous" not in {f.id for f in quiet}
