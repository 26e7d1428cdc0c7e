"""`gpudoctor kernel`: the static scan, the call spec, and real runs of user-style kernels with MAX on the CPU."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, TESTS, run_cli, validate_report

from gpudoctor.errors import GpuDoctorError
from gpudoctor.kernel.calls import CallRequest, load_spec, parse_parameter, parse_shape, resolve_calls
from gpudoctor.kernel.scan import scan_package
from gpudoctor.kernel.subject import gpu_targets
from gpudoctor.knowledge import load_knowledge, match_findings
from gpudoctor.model import Driver, Environment, Gpu, Outcome, Platform, Report
from gpudoctor.report.codec import decode, encode

KERNELS = TESTS / "kernels"
CONTROL = ROOT / "kernels" / "mojo1" / "control"

EXECUTE_HEAD = """\
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


@register("op")
struct Op:
    @staticmethod
    def execute[
        target: StaticString,
        factor: Int = 2,
    ](
        out: OutputTensor[dtype = DType.float32, rank=2, ...],
        x: InputTensor[dtype = DType.bfloat16, rank=3, ...],
        y: InputTensor[rank=1, ...],  # generic dtype
        ctx: DeviceContext,
    ) raises:
"""


def _scan_body(tmp_path: Path, body: str) -> list[tuple[int, str]]:
    (tmp_path / "__init__.mojo").write_text("")
    (tmp_path / "op.mojo").write_text(EXECUTE_HEAD + body)
    scan = scan_package(tmp_path)
    assert scan.is_package and [op.name for op in scan.ops] == ["op"]
    return [(line.line, line.text) for line in scan.ops[0].host_indexing]


# --- the static scan -------------------------------------------------------------------------------


def test_scan_reads_the_execute_signature(tmp_path: Path) -> None:
    _scan_body(tmp_path, "        pass\n")
    op = scan_package(tmp_path).ops[0]
    assert op.struct == "Op" and op.file == "op.mojo" and op.line == 6
    assert [(t.name, t.role, t.dtype, t.rank) for t in op.tensors] == [
        ("out", "output", "float32", 2),
        ("x", "input", "bfloat16", 3),
        ("y", "input", None, 1),
    ]
    assert op.parameters == ("factor: Int = 2",)


def test_scan_flags_host_indexing_but_not_closures_or_cpu_branches(tmp_path: Path) -> None:
    body = """\
        out[0, 0] = x[0, 0, 0]          # line 18: host code on every target
        def f[width: Int](idx: Coord) {x} -> SIMD[DType.float32, width]:
            return x.load[width](idx)   # inside the closure foreach runs: fine
        foreach[target=target](f, out, ctx)
        if target == "cpu":
            out[1, 1] = 0               # CPU-only branch: host memory, fine
        else:
            var v = y[0]                # line 25: the GPU side of the test
        comptime if is_cpu[target]():
            out.store(0, 1)             # fine
        var n = out.dim_size(0)         # a shape query, not memory: fine
        for i in range(3):
            out.store(i, x.load(i))     # line 30: host loop touching memory
        # out[9, 9] = 1 in a comment is not code
"""
    assert _scan_body(tmp_path, body) == [
        (18, "out[0, 0] = x[0, 0, 0]"),
        (25, "var v = y[0]"),
        (30, "out.store(i, x.load(i))"),
    ]


def test_scan_of_the_shipped_kernels() -> None:
    control = scan_package(CONTROL)
    assert {op.name for op in control.ops} == {"add_one", "scale"}
    assert control.host_indexing == () and control.legacy_imports == ()
    legacy = scan_package(KERNELS / "legacy_syntax")
    assert [line.text for line in legacy.legacy_imports] == [
        "import compiler",
        "from runtime.asyncrt import DeviceContextPtr",
        "from tensor import InputTensor, OutputTensor",
    ]
    assert [str(line) for line in scan_package(KERNELS / "host_indexing").host_indexing] == [
        "copy_first.mojo:18: output[0, 0] = input[0, 0]"
    ]
    assert scan_package(KERNELS / "gpu_differs").host_indexing == ()  # its host write is CPU-only
    assert not scan_package(KERNELS / "no_init").is_package


# --- the call spec ---------------------------------------------------------------------------------


def test_options_are_completed_from_the_signature() -> None:
    scan = scan_package(CONTROL)
    (call,) = resolve_calls([CallRequest("scale", "--op scale", shape=(2, 3), parameters={"factor": 3})], scan)
    assert call.describe() == "scale[factor=3](out: float32[2x3]; in: float32[2x3])"
    assert parse_shape("64x64") == (64, 64) and parse_shape("3, 4") == (3, 4)
    assert parse_parameter("n=3") == ("n", 3) and parse_parameter("b=true") == ("b", True)
    assert parse_parameter("r=0.5") == ("r", 0.5) and parse_parameter("s=abc") == ("s", "abc")


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (CallRequest("nope", "--op nope", shape=(2, 2)), "no op 'nope' in the package"),
        (CallRequest("add_one", "--op add_one", shape=(2, 2, 2)), "'output' is rank 2 in the signature"),
        (CallRequest("add_one", "--op add_one"), "no shape for output 'output'"),
        (CallRequest("add_one", "--op add_one", shape=(2, 2), outputs=((None, "int32"),)), "is float32 in the sig"),
        (CallRequest("add_one", "--op add_one", shape=(2, 2), inputs=((None, None),) * 2), r"takes 1 input\(s\)"),
    ],
)
def test_calls_that_clash_with_the_signature_are_usage_errors(request_: CallRequest, message: str) -> None:
    with pytest.raises(GpuDoctorError, match=message):
        resolve_calls([request_], scan_package(CONTROL))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[call]]\nop = 3\n", r"call\[0\]: field 'op'"),
        ("[[call]]\nop = 'a'\nshape = [0, 2]\n", r"call\[0\]: field 'shape'"),
        ("[[call]]\nop = 'a'\ndtype = 'float128'\n", r"call\[0\]: field 'dtype'"),
        ("[[call]]\nop = 'a'\nvalues = 'zeros'\n", r"call\[0\]: field 'values'"),
        ("[[call]]\nop = 'a'\nrtol = -1\n", r"call\[0\]: field 'rtol'"),
        ("[[call]]\nop = 'a'\nparameters = { n = [1] }\n", r"call\[0\]: parameter 'n'"),
        ("[[call]]\nop = 'a'\ninputs = [{ shape = [2], colour = 'red' }]\n", r"field 'inputs'\[0\].*colour"),
        ("[[call]]\nop = 'a'\nsurprise = 1\n", r"call\[0\].*surprise"),
        ("[[call]]\nop = 'a'\n[[call]]\nop = 'b'\nshape = 'big'\n", r"call\[1\]: field 'shape'"),
        ("calls = 1\n", "unknown top-level key 'calls'"),
        ("[[call]\n", "not valid TOML"),
    ],
)
def test_malformed_spec_files_name_file_call_and_field(tmp_path: Path, text: str, message: str) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    with pytest.raises(GpuDoctorError, match=message) as caught:
        load_spec(spec)
    assert str(spec) in caught.value.one_line()


def test_one_run_per_gpu_each_selected_in_its_own_process() -> None:
    def environment(count: int) -> Environment:
        gpus = tuple(Gpu(index=i, name="GPU") for i in range(count))
        platform = Platform("3.11", "CPython", "Linux", None, None, None, "x86_64")
        return Environment(platform, Driver("ok", "580", "13.0", gpus), {}, {}, "python")

    assert [(t.label, t.env) for t in gpu_targets(environment(1), env={})] == [(None, {})]
    two = gpu_targets(environment(2), env={})
    assert [t.label for t in two] == ["0", "1"]
    assert two[1].env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}
    chosen = gpu_targets(environment(4), env={"CUDA_VISIBLE_DEVICES": "2,3"})
    assert [(t.label, t.env) for t in chosen] == [
        ("0", {"CUDA_VISIBLE_DEVICES": "2"}),
        ("1", {"CUDA_VISIBLE_DEVICES": "3"}),
    ]


# --- real runs with torch and MAX on the CPU ---------------------------------------------------------


def _kernel_json(*args: str) -> tuple[int, dict[str, Any]]:
    completed = run_cli("kernel", *args, "--json")
    assert completed.stdout, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    validate_report(report)
    return completed.returncode, report


def _result(report: dict[str, Any], run_id: str) -> dict[str, Any]:
    return next(r for r in report["results"] if r["id"] == run_id)


def _finding(report: dict[str, Any], finding_id: str) -> dict[str, Any]:
    found = [f for f in report["findings"] if f["id"] == finding_id]
    assert found, [f["id"] for f in report["findings"]]
    return found[0]


def test_host_indexing_kernel_passes_on_the_cpu_yet_gets_the_static_hint() -> None:
    code, report = _kernel_json(str(KERNELS / "host_indexing"), "--op", "copy_first", "--shape", "1x1")
    assert _result(report, "kernel/cpu")["outcome"] == "pass"
    assert _result(report, "custom-op/cpu")["outcome"] == "pass"  # the control ran next to it
    for run_id in ("kernel/cuda", "custom-op/cuda"):
        assert _result(report, run_id)["skip_reason"] == "no CUDA device (no NVIDIA driver)"
    finding = _finding(report, "host-code-indexes-device-tensor")
    assert finding["evidence"] == [
        "static scan: copy_first.mojo:18: `output[0, 0] = input[0, 0]` (op copy_first, outside foreach)"
    ]
    assert "foreach" in finding["fix"]
    assert code == 1  # a problem finding, although every probe that ran passed
    assert report["kernel"]["calls"][0]["outputs"] == [{"shape": [1, 1], "dtype": "float32"}]


def test_the_op_called_is_judged_and_the_scan_of_another_op_is_a_notice_naming_it() -> None:
    """A package with a clean op beside one that indexes tensors from host code: `--op add_one` passes against the
    user's reference and exits 0; what the scan saw in copy_first is told as a notice that names copy_first."""
    package = str(KERNELS / "mixed_ops")
    code, report = _kernel_json(package, "--op", "add_one", "--shape", "4x4", "--reference", "x0 + 1")
    assert _result(report, "kernel/cpu")["outcome"] == "pass"
    assert _result(report, "kernel/cpu")["details"]["results_checked"] == "reference"
    assert code == 0, [(f["id"], f["severity"]) for f in report["findings"]]
    assert "host-code-indexes-device-tensor" not in {f["id"] for f in report["findings"]}
    notice = _finding(report, "host-code-indexes-device-tensor-in-an-op-not-called")
    assert notice["severity"] == "notice"
    assert notice["evidence"] == [
        "static scan: copy_first.mojo:18: `output[0, 0] = input[0, 0]` (op copy_first, outside foreach; "
        "copy_first was not called in this run)"
    ]
    text = run_cli("kernel", package, "--op", "add_one", "--shape", "4x4", "--reference", "x0 + 1")
    assert text.returncode == 0 and "copy_first was not called in this run" in text.stdout

    code, report = _kernel_json(package, "--op", "copy_first", "--shape", "1x1")
    assert code == 1  # the op called is the one the scan flags: a problem, as for the host_indexing package
    assert _finding(report, "host-code-indexes-device-tensor")["evidence"] == [
        "static scan: copy_first.mojo:18: `output[0, 0] = input[0, 0]` (op copy_first, outside foreach)"
    ]
    assert "host-code-indexes-device-tensor-in-an-op-not-called" not in {f["id"] for f in report["findings"]}


def test_without_calls_the_package_is_compiled_and_its_ops_listed() -> None:
    completed = run_cli("kernel", str(CONTROL))
    assert completed.returncode == 0, completed.stdout + completed.stderr[-2000:]
    assert "compiles on cpu; ops: add_one, scale (no calls given)" in completed.stdout
    assert "op scale (scale.mojo:" in completed.stdout and "parameters [factor: Int = 2]" in completed.stdout
    assert f"gpudoctor kernel {CONTROL} --op add_one --shape 64x64" in completed.stdout
    assert "custom-op/" not in completed.stdout  # nothing to compare, so no control run


def test_kernel_written_for_old_mojo_gets_the_migration_hint() -> None:
    code, report = _kernel_json(str(KERNELS / "legacy_syntax"), "--op", "copy_first", "--shape", "1x1")
    assert code == 1
    result = _result(report, "kernel/cpu")
    assert result["outcome"] == "fail" and result["exception_type"].endswith("CompileFailed")
    errors = result["details"]["compile_errors"]
    assert any("copy_first.mojo:2:8: error: unable to locate module 'compiler'" in e for e in errors)
    assert any("'fn' has been removed" in e for e in errors)
    migration = _finding(report, "mojo1-kernel-migration")
    assert migration["evidence"] == ["kernel/cpu fail, matching \"unable to locate module 'compiler'\""]
    assert "from extensibility import register" in migration["fix"]
    assert "mojo precompile PATH -o /tmp/check.mojoc" in _finding(report, "kernel-does-not-compile")["fix"]
    # The source check says what each generic diagnostic means, and where the package would compile.
    source = _finding(report, "kernel-source-needs-another-release")["evidence"]
    assert (
        source[0]
        == "source check: written for MAX 25.3.0 - 26.1.0; 8 line(s) are not accepted by the installed max 26.7.0"
    )
    assert any(
        e.startswith("the compiler's \"copy_first.mojo:2: unable to locate module 'compiler'\" is `import compiler`")
        for e in source
    )
    assert source[-1].startswith(
        "to run it on the release it was written for: gpudoctor sweep --torch 2.13.0 --max 26.1.0"
    )


def test_folder_without_init_mojo_is_explained() -> None:
    code, report = _kernel_json(str(KERNELS / "no_init"), "--op", "add_one", "--shape", "2x2", "--device", "cpu")
    assert code == 1
    assert "must be a Mojo source or binary package" in _result(report, "kernel/cpu")["message"]
    assert report["kernel"]["scan"]["is_package"] is False
    assert _finding(report, "custom-op-library-not-a-package")["fix"] == "touch <kernel dir>/__init__.mojo"


def test_spec_file_calls_and_a_parameter_mismatch(tmp_path: Path) -> None:
    spec = tmp_path / "calls.toml"
    spec.write_text(
        '[[call]]\nop = "add_one"\nshape = [4, 5]\nvalues = "random"\n\n'
        '[[call]]\nop = "scale"\nshape = [2, 3]\nparameters = { scale_factor = 3 }\n'
    )
    code, report = _kernel_json(str(CONTROL), "--spec", str(spec), "--device", "cpu")
    assert code == 1
    result = _result(report, "kernel/cpu")
    assert result["outcome"] == "fail"
    assert result["last_step"] == "call scale[scale_factor=3] on cpu"  # add_one ran first and passed
    finding = _finding(report, "custom-op-parameter-mismatch")
    assert "supplied to custom op 'scale' does not exist in the corresponding Mojo code" in finding["evidence"][0]


def test_a_cpu_branch_that_computes_nothing_is_not_a_pass_and_an_unchecked_run_says_so() -> None:
    # The CPU branch of `double` is a placeholder returning zeros, as in a public conv1d kernel.
    code, report = _kernel_json(str(KERNELS / "cpu_zeros"), "--op", "double", "--shape", "4x4", "--device", "cpu")
    assert code == 1
    result = _result(report, "kernel/cpu")
    # Told by experiment: called again with other input values, its output stayed all zeros.
    assert result["outcome"] == "fail" and result["details"]["ignores_inputs"] is True
    assert "double output 0 (float32[4, 4]) does not follow the inputs" in result["summary"]
    assert "it is all zeros after every call, for different inputs" in result["summary"]
    assert _finding(report, "kernel-output-ignores-inputs")["runs"] == ["kernel/cpu"]
    # A kernel that does compute, with nothing to compare against, is said to be unchecked, not correct.
    code, report = _kernel_json(str(CONTROL), "--op", "add_one", "--shape", "3x3", "--device", "cpu")
    result = _result(report, "kernel/cpu")
    assert code == 0 and result["outcome"] == "pass"
    assert "ran; results not checked (no reference" in result["summary"]
    assert result["details"]["results_checked"] == "none"


def test_a_reference_judges_each_call_and_names_the_wrong_device(tmp_path: Path) -> None:
    (tmp_path / "ref.py").write_text("def doubled(x):\n    return x * 2\n")
    spec = tmp_path / "calls.toml"
    spec.write_text(
        '[[call]]\nop = "add_one"\nshape = [4, 4]\nreference = "x0 + 1"\n\n'
        '[[call]]\nop = "add_one"\nshape = [3, 5]\nreference = "ref.py:doubled"\n'
    )
    code, report = _kernel_json(str(CONTROL), "--spec", str(spec), "--device", "cpu")
    assert code == 1
    result = _result(report, "kernel/cpu")
    assert result["last_step"] == "check add_one against the reference"  # the first call matched its reference
    assert result["details"]["differs_from_reference"] is True
    assert "add_one output 0 (float32[3, 5]) on cpu differs from your reference: 14 of 15 elements" in result["summary"]
    assert _finding(report, "kernel-differs-from-reference")["runs"] == ["kernel/cpu"]
    assert report["kernel"]["calls"][0]["reference"] == {"expression": "x0 + 1"}
    assert report["kernel"]["calls"][1]["reference"]["function"] == "doubled"
    # A reference that raises is the reference's fault, and said so.
    spec.write_text('[[call]]\nop = "add_one"\nshape = [2, 2]\nreference = "x0 + x1"\n')
    code, report = _kernel_json(str(CONTROL), "--spec", str(spec), "--device", "cpu")
    assert "the reference for add_one raised NameError" in _result(report, "kernel/cpu")["summary"]
    assert _finding(report, "kernel-reference-fails")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["kernel", "/no/such/package"], "/no/such/package: no such file or directory"),
        (["kernel", str(CONTROL), "--shape", "2x2"], "--shape, --dtype, --param and --reference need --op NAME"),
        (
            ["kernel", str(CONTROL), "--op", "add_one", "--reference", "x0 +"],
            "the reference is not a Python expression",
        ),
        (["kernel", str(CONTROL), "--op", "add_one", "--reference", "nope.py:f"], "reference file 'nope.py' not found"),
        (["kernel", str(CONTROL), "--op", "add_one", "--op", "scale", "--reference", "x0"], "give each its own"),
        (["kernel", str(CONTROL), "--op", "add_one", "--shape", "2xfour"], "--shape '2xfour': not a shape"),
        (["kernel", str(CONTROL), "--op", "add_one", "--shape", "2x2", "--param", "oops"], "write it as name=value"),
        (["kernel", str(CONTROL), "--op", "nope", "--shape", "2"], "no op 'nope' in the package"),
    ],
)
def test_kernel_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    completed = run_cli(*args)
    assert completed.returncode == 2
    assert message in completed.stderr and len(completed.stderr.strip().splitlines()) == 1
    assert completed.stdout == ""


def test_a_shared_param_goes_only_to_the_ops_that_declare_it() -> None:
    scan = scan_package(CONTROL)
    requests = [
        CallRequest(op, f"--op {op}", shape=(2, 2), parameters={"factor": 3, "other": 1}, shared_parameters=True)
        for op in ("add_one", "scale")
    ]
    add_one, scale = resolve_calls(requests, scan)
    # "factor" is scale's; "other" is declared nowhere, so it reaches both and MAX reports it.
    assert add_one.parameters == {"other": 1} and scale.parameters == {"factor": 3, "other": 1}


# --- what the H100 recorded (real runs, see docs/h100-kernel.md) ----------------------------------------


def _recorded(name: str) -> Report:
    return decode(json.loads((TESTS / "fixtures" / name).read_text()))


def test_recorded_h100_host_indexing_crash_is_diagnosed_next_to_the_passing_control() -> None:
    recorded = _recorded("h100-kernel-host-indexing.json")
    validate_report(encode(recorded))
    crash = recorded.result("kernel/cuda")
    assert crash is not None and crash.outcome is Outcome.CRASH and crash.signal == "SIGSEGV"
    assert crash.last_step == "call copy_first on cuda"
    assert recorded.result("custom-op/cuda").outcome is Outcome.PASS  # type: ignore[union-attr]
    assert recorded.result("kernel/cpu").outcome is Outcome.PASS  # type: ignore[union-attr]
    # Matching is pure: today's knowledge applied to the recorded results gives the same diagnosis.
    findings = {f.id: f for f in match_findings(recorded, load_knowledge())}
    assert set(findings) == {"host-code-indexes-device-tensor"}
    assert findings["host-code-indexes-device-tensor"].evidence == (
        "static scan: copy_first.mojo:18: `output[0, 0] = input[0, 0]` (op copy_first, outside foreach)",
        "kernel/cuda crashed (SIGSEGV) while the control kernel custom-op/cuda passed on the same GPU and stack",
    )


def test_recorded_h100_gpu_result_difference_is_caught() -> None:
    recorded = _recorded("h100-kernel-gpu-differs.json")
    failed = recorded.result("kernel/cuda")
    assert failed is not None and failed.outcome is Outcome.FAIL and failed.details["differs_from_cpu"] is True
    assert "12 of 12 elements beyond rtol=0.0001, atol=1e-05" in failed.summary
    assert "cuda 0.0 vs cpu -1.0" in failed.summary  # -2 + 2 on the GPU, -2 + 1 on the CPU
    findings = {f.id for f in match_findings(recorded, load_knowledge())}
    assert findings == {"kernel-gpu-differs-from-cpu"}


def test_control_failing_too_blames_the_stack() -> None:
    recorded = _recorded("h100-kernel-host-indexing.json")
    control = recorded.result("custom-op/cuda")
    assert control is not None
    broken = dataclasses.replace(control, outcome=Outcome.CRASH, signal="SIGSEGV")
    stack_broken = dataclasses.replace(
        recorded, results=tuple(broken if r.id == control.id else r for r in recorded.results)
    )
    findings = {f.id: f for f in match_findings(stack_broken, load_knowledge())}
    assert findings["control-kernel-fails-too"].evidence == (
        "kernel/cuda crash and the control kernel custom-op/cuda crash too",
    )
    # The static hint stays, but a crash is no longer blamed on the kernel alone.
    assert all("while the control kernel" not in e for e in findings["host-code-indexes-device-tensor"].evidence)


def test_recorded_two_gpu_runs_are_one_process_per_gpu_each_next_to_its_control() -> None:
    crashed = _recorded("h200x2-kernel-host-indexing.json")
    assert [gpu.name for gpu in crashed.environment.driver.gpus] == ["NVIDIA H200", "NVIDIA H200"]
    for index in ("0", "1"):
        kernel, control = crashed.result(f"kernel/cuda:{index}"), crashed.result(f"custom-op/cuda:{index}")
        assert kernel is not None and control is not None
        assert (kernel.outcome, kernel.signal, control.outcome) == (Outcome.CRASH, "SIGSEGV", Outcome.PASS)
        assert kernel.command.startswith(f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={index} ")
    (finding,) = match_findings(crashed, load_knowledge())
    assert finding.id == "host-code-indexes-device-tensor"
    assert finding.evidence[1:] == tuple(
        f"kernel/cuda:{i} crashed (SIGSEGV) while the control kernel custom-op/cuda:{i} passed on the same GPU "
        "and stack"
        for i in ("0", "1")
    )
    healthy = _recorded("h200x2-kernel-control.json")
    for index in ("0", "1"):
        result = healthy.result(f"kernel/cuda:{index}")
        assert result is not None and result.summary == "add_one ran on cuda and matches the CPU"
        assert result.details["compared_with_cpu"] is True
    assert match_findings(healthy, load_knowledge()) == ()


def test_a_gpu_style_run_waits_for_the_cpu_run_only_when_it_compares(tmp_path: Path) -> None:
    """The comparing run starts at once and waits for the doctor's "CPU run ended" marker only before the
    comparison; by hand (the marker's folder gone) it does not wait at all. Real processes, real MAX."""
    probe = [sys.executable, str(ROOT / "probes" / "kernel.py"), "--device", "cpu", "--package", str(CONTROL)]
    calls = json.dumps(
        [
            {
                "op": "add_one",
                "outputs": [{"shape": [2, 3], "dtype": "float32"}],
                "inputs": [{"shape": [2, 3], "dtype": "float32"}],
            }
        ]
    )
    saved, scratch = tmp_path / "saved.pt", tmp_path / "scratch"
    first = subprocess.run([*probe, "--calls", calls, "--save", str(saved)], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-2000:]
    scratch.mkdir()
    marker, reference = scratch / "cpu-run-ended", scratch / "cpu-results.pt"
    waiting = subprocess.Popen(
        [*probe, "--calls", calls, "--compare", str(reference), "--cpu-done", str(marker)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert waiting.stderr is not None
    for line in waiting.stderr:  # the harness prints each step as it starts
        if "wait for the CPU run to end" in line:
            break
    assert waiting.poll() is None  # it is waiting, having done its own calls
    shutil.copy(saved, reference)
    marker.touch()
    out, _ = waiting.communicate(timeout=120)
    assert waiting.returncode == 0
    assert "PASS kernel/cpu: add_one on cpu: results match the CPU's" in out
    shutil.rmtree(scratch)
    by_hand = subprocess.run(
        [*probe, "--calls", calls, "--compare", str(reference), "--cpu-done", str(marker)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert by_hand.returncode == 0 and "add_one on cpu: ran; results not checked (no reference" in by_hand.stdout
    # A saved result that its own run found wrong (all zeros) is not used to judge another run.
    zeros = [sys.executable, str(ROOT / "probes" / "kernel.py"), "--device", "cpu"]
    zeros += ["--package", str(KERNELS / "cpu_zeros"), "--calls", calls.replace("add_one", "double")]
    suspect = subprocess.run([*zeros, "--save", str(saved)], capture_output=True, text=True, timeout=300)
    assert suspect.returncode != 0 and "does not follow the inputs" in suspect.stdout
    assert "it is all zeros after every call, for different inputs" in suspect.stdout
    judged = subprocess.run([*probe, "--calls", calls, "--compare", str(saved)], capture_output=True, text=True)
    assert judged.returncode == 0, judged.stdout + judged.stderr[-2000:]
    assert "results not checked (the CPU's result looks wrong, so it is no reference: double output 0" in judged.stdout


def test_recorded_h100_run_judges_each_device_against_the_reference() -> None:
    """The GPU half of the honest verdicts, recorded on the H100 (tests/kernels/cpu_zeros with
    `--reference "x0 * 2"`): the CPU branch that writes zeros fails against the reference, the GPU branch is
    judged on its own against the same reference and passes."""
    document = json.loads((ROOT / "tests" / "fixtures" / "h100-kernel-cpu-zeros.json").read_text())
    validate_report(document)
    report = decode(document)
    assert report.environment.driver.gpus[0].name == "NVIDIA H100 80GB HBM3"
    cpu, cuda = report.result("kernel/cpu"), report.result("kernel/cuda")
    assert cpu is not None and cpu.outcome is Outcome.FAIL and cpu.details.get("differs_from_reference") is True
    assert cuda is not None and cuda.outcome is Outcome.PASS and cuda.details.get("results_checked") == "reference"
    assert [f.id for f in report.findings if f.severity == "problem"] == ["kernel-differs-from-reference"]
