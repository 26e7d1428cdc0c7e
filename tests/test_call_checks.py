"""Custom-op calls checked against what each op declares (gpudoctor.calls). The contracts are read from real op
packages (tests/call_checks/ops, the kernels of tests/kernels and gpudoctor's control kernels); single calls are
checked with real torch tensors (a CUDA device, which this machine lacks, is the one thing faked); real programs run
under `gpudoctor run` with real MAX on the CPU, where each mistake is named although MAX then fails or returns
garbage, and a test suite of a user's (tests/call_checks/users_suite.py) uses the checks from Python."""

from __future__ import annotations

import ast
import ctypes
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import ROOT, validate_report

from gpudoctor.calls import channel
from gpudoctor.calls.check import Kind, Mismatch, check_call, parameter_mismatch
from gpudoctor.calls.contract import Contract, built_from, read_contracts
from gpudoctor.calls.launches import check_launch, host_mapping
from gpudoctor.kernel.calls import CallRequest, load_spec, resolve_calls
from gpudoctor.kernel.scan import scan_package
from gpudoctor.report.codec import decode

CALLS = ROOT / "tests" / "call_checks"
OPS = CALLS / "ops"
KERNELS = ROOT / "tests" / "kernels"
SITE = "prog.py:23"
# MAX compiles each graph on its first call (20-80 s on this shared CPU); its IR cache keeps them between the tests.
MAX_ENV = {**os.environ, "MODULAR_MAX_ENABLE_MODEL_IR_CACHE": "1"}


def _contract(op: str, package: Path = OPS) -> Contract:
    return read_contracts(package).contracts[op]


def _check(contract: Contract, *args: Any, **kwargs: Any) -> tuple[Mismatch | None, list[str]]:
    os.chdir(ROOT)  # sentences name files relative to the current folder
    return check_call(contract, args, kwargs, lambda: SITE)


class OnDevice:
    """A real tensor said to be on another device (a CUDA GPU, which this machine has not)."""

    def __init__(self, tensor: torch.Tensor, device: str) -> None:
        self.tensor, self.device = tensor, torch.device(device)
        self.dtype, self.shape = tensor.dtype, tensor.shape

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tensor, name)


def test_the_scan_reads_what_a_call_must_match(tmp_path: Path) -> None:
    plus_one, times = _contract("plus_one"), _contract("times")
    assert [(t.name, t.role, t.dtype, t.rank, t.line) for t in plus_one.tensors] == [
        ("output", "output", "float32", 2, 15), ("input", "input", "float32", 2, 16)]  # fmt: skip
    assert plus_one.at(16) == "tests/call_checks/ops/plus_one.mojo:16" and plus_one.execute_line == 12
    assert [(r.output, r.input, r.line) for r in plus_one.same_index_reads] == [("output", "input", 20)]
    assert [(p.name, p.required) for p in times.parameters] == [("factor", True)]
    assert not _contract("refuses").same_index_reads  # it reads nothing
    # defaults, infer-only parameters (before //) and parameters a tensor's type binds are not the call's to give
    legacy = scan_package(KERNELS / "legacy_styles")
    assert [(p.name, p.required) for op in legacy.ops for p in op.compile_parameters] == [
        ("dtype", False), ("factor", False)]  # fmt: skip
    # a foreach reading an input at other indices (luma's three channels) says nothing of sizes; one under a GPU
    # branch holds on the GPU only
    assert not scan_package(KERNELS / "correct_dtypes").ops[0].same_index_reads
    (copy_in,) = scan_package(KERNELS / "accumulates").ops
    assert [(r.input, r.only) for r in copy_in.same_index_reads] == [("input", "gpu")]
    package = tmp_path / "gpu_only"
    package.mkdir()
    (package / "__init__.mojo").write_text("")
    body = (OPS / "plus_one.mojo").read_text().split("@register")[1]
    refusing = body.replace("        foreach[target=target](plus_one, output, ctx)",
                            '        comptime if target == "cpu":\n            raise Error("no CPU path")\n'
                            "        foreach[target=target](plus_one, output, ctx)")  # fmt: skip
    (package / "op.mojo").write_text("@register" + refusing)
    assert scan_package(package).ops[0].targets == ("gpu",)
    # MAX's own examples: a parameter of the struct (`op[{"value": 5}]`), and an else after `if cpu` / `elif gpu`,
    # which runs on neither (vector_addition's `raise Error("No known target:", target)`)
    both = (body.replace("struct PlusOne:", "struct PlusOne[value: Int]:")
            .replace("        foreach[target=target](plus_one, output, ctx)",
                     '        comptime if target == "cpu":\n            foreach[target=target](plus_one, output, ctx)\n'
                     '        elif target == "gpu":\n            foreach[target=target](plus_one, output, ctx)\n'
                     '        else:\n            raise Error("No known target:", target)'))  # fmt: skip
    (package / "op.mojo").write_text("@register" + both)
    (op,) = scan_package(package).ops
    assert op.targets == ("cpu", "gpu") and [(p.name, p.required) for p in op.compile_parameters] == [("value", True)]


def test_each_mistake_is_one_sentence_naming_the_op_the_argument_and_the_call() -> None:
    plus_one = _contract("plus_one")
    x, out = torch.ones(4, 4), torch.empty(4, 4)
    assert _check(plus_one, out, x) == (None, [])
    at = "tests/call_checks/ops/plus_one.mojo"
    said = {
        "float64 input": _check(plus_one, out, x.double())[0],
        "rank 3 input": _check(plus_one, out, torch.ones(4, 4, 1))[0],
        "int32 output": _check(plus_one, torch.empty(4, 4, dtype=torch.int32), x)[0],
        "larger output": _check(plus_one, torch.empty(64, 64), x)[0],
        "one argument": _check(plus_one, out)[0],
        "output is input": _check(plus_one, x, x)[0],
        "unknown name": _check(plus_one, out, inpt=x)[0],
        "input on the CPU": _check(plus_one, OnDevice(out, "cuda:0"), x)[0],
        "meta tensors": _check(plus_one, out.to("meta"), x.to("meta"))[0],
    }
    assert {name: m.sentence if m else None for name, m in said.items()} == {
        "float64 input": f"plus_one ({at}:16) declares `input` float32 rank 2; the call at {SITE} passes float64 "
        "[4, 4]",
        "rank 3 input": f"plus_one ({at}:16) declares `input` float32 rank 2; the call at {SITE} passes "
        "float32 [4, 4, 1]",
        "int32 output": f"plus_one ({at}:15) declares `output` float32 rank 2; the call at {SITE} passes int32 [4, 4]",
        "larger output": f"plus_one ({at}:20) runs its foreach over `output` and reads `input` at the same index, so "
        f"`input` must be at least as large as `output`; the call at {SITE} passes `output` [64, 64] and "
        "`input` [4, 4]",
        "one argument": f"plus_one ({at}:12) declares 2 tensors (output `output`, then input `input`); the call at "
        f"{SITE} passes 1",
        "output is input": f"plus_one ({at}:12) writes its output `output` while it reads its inputs; the call at "
        f"{SITE} passes `output` and `input` in the same memory: give the output a buffer of its own",
        "unknown name": f"plus_one ({at}:12) declares no tensor `inpt` (output `output`, then input `input`); the call "
        f"at {SITE} passes `inpt=` by name",
        "input on the CPU": f"plus_one ({at}:12) runs on one device, with every tensor on it; the call at {SITE} "
        "passes `output` on cuda:0 and `input` on cpu",
        "meta tensors": f"plus_one ({at}:12) runs on cpu and gpu only; the call at {SITE} passes its tensors on meta",
    }
    assert _check(plus_one, input=x, output=out) == (None, [])  # by name, in any order
    assert _check(plus_one, out[:2], x[2:]) == (None, [])  # two halves of one buffer do not overlap
    assert _check(plus_one, torch.empty(2, 2), x) == (None, [])  # a smaller output reads less of its input
    # outputs passed after the inputs, told apart by what they declare
    luma = _contract("luma", KERNELS / "correct_dtypes")
    image = torch.zeros(8, 8, 3, dtype=torch.uint8)
    swapped = _check(luma, image, torch.zeros(8, 8, dtype=torch.uint8))[0]
    assert swapped is not None and swapped.kind is Kind.ORDER
    assert swapped.sentence.endswith("the call at prog.py:23 passes its inputs first")
    # what is not a tensor is said, and the rest still checked
    mismatch, unchecked = _check(plus_one, out, 1.5)
    assert mismatch is None and unchecked == [f"plus_one: the call at {SITE} passes `input` as a float, not a tensor: "
                                              "not checked"]  # fmt: skip
    times = _contract("times")
    missing = parameter_mismatch(times, None, SITE)
    assert missing is not None and missing.sentence == (
        f"times ({at}:29) declares the compile-time parameter `factor: Int` without a default; the call at {SITE} "
        'gives none (give it: `times[{"factor": ...}](...)`)')  # fmt: skip
    typo = parameter_mismatch(times, {"factr": 3}, SITE)
    assert (
        typo is not None and "declares no compile-time parameter `factr` (it declares `factor: Int`)" in typo.sentence
    )
    assert parameter_mismatch(times, {"factor": 3}, SITE) is None


def _tensors(specs: Any) -> list[torch.Tensor]:
    return [torch.zeros(spec.shape, dtype=getattr(torch, spec.dtype)) for spec in specs]


def test_the_calls_gpudoctor_kernel_and_the_probes_make_all_match_but_the_deliberate_bug() -> None:
    """Every call `gpudoctor kernel` makes on the fixture kernels (their spec, else --shape 8x8) and the control
    probes' calls: no mismatch, but oob_read's, whose spec passes the 2x2 bias its op reads with 256x256 indices."""
    mismatches = {}
    for package in sorted(p for p in KERNELS.iterdir() if (p / "__init__.mojo").is_file()):
        scan = scan_package(package)
        spec = package / "spec.toml"
        requests = load_spec(spec) if spec.is_file() else [CallRequest(op.name, "--op", (8, 8)) for op in scan.ops]
        for call in resolve_calls(requests, scan):
            contract = read_contracts(package).contracts[call.op]
            found, unchecked = _check(contract, *_tensors(call.outputs), *_tensors(call.inputs))
            found = found or parameter_mismatch(contract, call.parameters, SITE)
            assert unchecked == []
            if found:
                mismatches[f"{package.name}/{call.op}"] = found.kind
    assert mismatches == {"oob_read/add_bias": Kind.SHAPE}
    for control in sorted((ROOT / "kernels").glob("*/control")):
        contracts = read_contracts(control).contracts
        x = torch.arange(12.0).reshape(3, 4)
        for op, parameters in (("add_one", None), ("scale", None), ("scale", {"factor": 3})):
            assert _check(contracts[op], torch.empty_like(x), x) == (None, []), control
            assert parameter_mismatch(contracts[op], parameters, SITE) is None


def test_what_cannot_be_read_is_said_in_one_line(tmp_path: Path) -> None:
    compiled = tmp_path / "ops.mojoc"
    compiled.write_bytes(b"\0mojo")
    assert read_contracts(compiled).unreadable == (
        f"the library was made from {compiled}, which is compiled: without its source the ops' declarations cannot "
        "be read, so their calls are not checked")  # fmt: skip
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "__init__.mojo").write_bytes(b"\xff\xfe not mojo \x00")
    (garbage / "op.mojo").write_text('@register("half\nstruct {{{\n')
    assert "no op with an `execute` was found in the source of" in str(read_contracts(garbage).unreadable)
    assert read_contracts(OPS).missing("nonesuch").startswith("op `nonesuch`: no declaration of it was found")


def test_the_hook_and_the_run_agree_on_the_switches() -> None:
    hook = (ROOT / "src" / "gpudoctor" / "calls" / "startup" / "sitecustomize.py").read_text()
    modes = next(
        n.value
        for n in ast.walk(ast.parse(hook))
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "_MODES"
    )
    assert ast.literal_eval(modes) == tuple(m.value for m in channel.Mode if m is not channel.Mode.OFF)
    assert f'"{channel.MODE_ENV}"' in hook and f'"{channel.FILE_ENV}"' in hook
    env = channel.environment({"PYTHONPATH": "/mine"}, Path("/tmp/events.jsonl"))
    assert env["PYTHONPATH"] == f"{channel.HOOK_DIR}{os.pathsep}/mine" and env[channel.MODE_ENV] == "record"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`gpudoctor ARGS` from the repository's root, with MAX's compile cache on."""
    return subprocess.run([sys.executable, "-m", "gpudoctor", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env or MAX_ENV, stdin=subprocess.DEVNULL, timeout=900, check=False)  # fmt: skip


def _line_of(text: str) -> str:
    """The program's line that makes the call named ``text`` in tests/call_checks/mistakes.py."""
    lines = (CALLS / "mistakes.py").read_text().splitlines()
    quoted = f'"{text}"'
    return f"tests/call_checks/mistakes.py:{next(n + 1 for n, line in enumerate(lines) if quoted in line)}"


def test_under_gpudoctor_run_each_mistake_is_named_although_max_fails_or_returns_garbage() -> None:
    mistakes = ("correct", "rank3-input", "int32-output", "output-larger", "missing-parameter", "one-argument",
                "float64-input")  # fmt: skip
    completed = _run("run", "--json", "--no-debugger", "--", "python", "tests/call_checks/mistakes.py", *mistakes,
                     "--last-fails")  # fmt: skip
    assert completed.returncode == 1, completed.stderr[-3000:]
    document = json.loads(completed.stdout)
    validate_report(document)
    report = decode(document)
    (result,) = report.results
    # what MAX said: a compile error it asks to be filed, and for the output larger than its input, nothing at all
    assert "Please file an issue" in result.summary and "output-larger: returned" in result.stdout_tail
    at = "tests/call_checks/ops/plus_one.mojo"
    expected = [
        f"plus_one ({at}:16) declares `input` float32 rank 2; the call at {_line_of('float64-input')} passes float64 "
        "[4, 4]",  # the call the program failed at comes first
        f"plus_one ({at}:16) declares `input` float32 rank 2; the call at {_line_of('rank3-input')} passes float32 "
        "[4, 4, 1]",
        f"plus_one ({at}:15) declares `output` float32 rank 2; the call at {_line_of('int32-output')} passes int32 "
        "[4, 4]",
        f"plus_one ({at}:20) runs its foreach over `output` and reads `input` at the same index, so `input` must be "
        f"at least as large as `output`; the call at {_line_of('output-larger')} passes `output` [64, 64] and `input` "
        "[4, 4]",
        f"times ({at}:29) declares the compile-time parameter `factor: Int` without a default; the call at "
        f'{_line_of("missing-parameter")} gives none (give it: `times[{{"factor": ...}}](...)`)',
        f"plus_one ({at}:12) declares 2 tensors (output `output`, then input `input`); the call at "
        f"{_line_of('one-argument')} passes 1",
    ]
    leading, _ = report.findings_in_order()
    assert leading[0].id == "custom-op-call-does-not-match-declaration"
    assert list(leading[0].evidence) == expected
    assert [f.id for f in report.findings if f.is_problem] == [leading[0].id]  # not "file an issue with MAX"
    assert f"plus_one at {_line_of('correct')}" in result.details["call_checks"]["checked"]


def test_every_call_matching_says_the_failure_is_past_the_arguments_and_the_checks_turn_off() -> None:
    completed = _run("run", "--json", "--no-debugger", "--", "python", "tests/call_checks/mistakes.py", "refuses",
                     "--last-fails")  # fmt: skip
    assert completed.returncode == 1, completed.stderr[-3000:]
    report = decode(json.loads(completed.stdout))
    ids = [f.id for f in report.findings]
    assert "custom-op-calls-matched-declarations" in ids and "custom-op-call-does-not-match-declaration" not in ids
    matched = next(f for f in report.findings if f.id == "custom-op-calls-matched-declarations")
    assert matched.evidence[0] == (f"1 call site(s) checked, each matching its op's declaration: refuses at "
                                   f"{_line_of('refuses')}")  # fmt: skip
    off = _run("run", "--json", "--no-debugger", "--no-call-checks", "--", "python", "tests/call_checks/mistakes.py",
               "one-argument", "--last-fails")  # fmt: skip
    (result,) = decode(json.loads(off.stdout)).results
    assert result.outcome.value == "fail" and "call_checks" not in result.details


def test_a_users_test_suite_checks_its_calls_from_python() -> None:
    """tests/call_checks/users_suite.py: GPUDOCTOR_CALL_CHECKS=raise through gpudoctor's pytest plugin, check() with
    warn, an argument that is not a tensor, a library made from a compiled package without and with its source."""
    env = {**MAX_ENV, "GPUDOCTOR_CALL_CHECKS": "raise"}
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                str(CALLS / "users_suite.py")], capture_output=True, text=True, cwd=ROOT, env=env,
                               timeout=900, check=False)  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-4000:]
    assert "5 passed" in completed.stdout


def test_gpudoctor_kernel_calls_on_a_fixture_match_with_the_checks_raising(tmp_path: Path) -> None:
    """The kernel probe's calls of tests/kernels/correct_dtypes (a uint8 image of rank 3, int32, a bool mask) and the
    control probe beside them, with the hook on and raising: every call matches; the control's compiled copy is said
    unchecked."""
    events = tmp_path / "events.jsonl"
    env = {**MAX_ENV, **channel.environment(os.environ, events, channel.Mode.RAISE)}
    package = KERNELS / "correct_dtypes"
    completed = _run("kernel", str(package), "--spec", str(package / "spec.toml"), "--json", env=env)
    assert completed.returncode == 0, completed.stdout[-3000:]
    summary = channel.summary(channel.read_events(events))
    assert summary is not None and summary["mismatches"] == []
    assert {line.split(" at ")[0] for line in summary["checked"]} == {"luma", "floor_to_min", "is_odd"}
    assert all("compiled" in line for line in summary["unchecked"])


def test_the_source_maxs_build_came_from_is_found_by_its_name(tmp_path: Path) -> None:
    package = tmp_path / "deep" / "kernels"
    package.mkdir(parents=True)
    (package / "__init__.mojo").write_text("")
    digest = hashlib.md5(str(package.absolute()).encode()).hexdigest()
    assert built_from(Path(f"/tmp/.modular_0/mojo_pkg/mojo_pkg_{digest}.mojoc"), (tmp_path,)) == package
    assert built_from(Path(f"/tmp/.modular_0/mojo_pkg/mojo_pkg_{'0' * 32}.mojoc"), (tmp_path,)) is None


class _Kernel:
    name = "scale"


class _HostBuffer:
    is_device_accessible = False
    size = 4096


def test_a_launch_given_a_host_address_is_named_before_it_faults() -> None:
    """cuda.core's launch (calls.launches): the driver, which this machine has not, is asked through a stand-in; the
    process's own mappings are real. A size or a count is no address; device memory passes."""
    buffer = ctypes.create_string_buffer(1 << 16)
    address = ctypes.addressof(buffer)
    maps = Path("/proc/self/maps").read_text()
    assert host_mapping(address, maps) is not None and host_mapping(12345, maps) is None
    unknown, known = (lambda _: False), (lambda _: True)
    found = check_launch(("stream", "config", _Kernel(), address, 1 << 20, 7), SITE, driver_knows=unknown)
    assert found is not None and found.kind is Kind.HOST_POINTER and found.sentence.startswith(
        f"the launch of scale at {SITE} passes argument 1 = {address:#x}, a host address (in ")  # fmt: skip
    assert check_launch(("s", "c", _Kernel(), address, 7), SITE, driver_knows=known) is None
    assert check_launch(("s", "c", _Kernel(), 1 << 20, 7), SITE, driver_knows=unknown) is None  # in no mapping
    host = check_launch(("s", "c", _Kernel(), _HostBuffer()), SITE, driver_knows=known)
    assert host is not None and "passes argument 1 = a host Buffer (4096 bytes)" in host.sentence


# the H100 recordings of issue 44's classes (scripts/record_gpu_classes.sh, 2026-11-27), made with the checks on
RECORDED = ROOT / "tests" / "fixtures" / "h100" / "classes"
RECORDING = {"hostcrash_mojo": "hostcrash_mojo", "mojo_oob_read": "mojo_oob_read-sanitize",
             "hostptr_cudacore": "hostptr_cudacore"}  # fmt: skip
ON_THE_H100 = {
    # the op's output on CUDA, its input left on the CPU: SIGSEGV after ~32 s, nothing printed
    "hostcrash_mojo": "add_one (tests/faulty_programs/hostcrash_mojo_ops/add_one.mojo:11) runs on one device, with "
    "every tensor on it; the call at tests/faulty_programs/hostcrash_mojo.py:12 passes `output` on cuda:0 and `input` "
    "on cpu",
    # a 2x2 bias read with a 256x256 output's indices: a plausible answer, exit 0
    "mojo_oob_read": "add_bias (tests/kernels/oob_read/add_bias.mojo:22) runs its foreach over `output` and reads "
    "`bias` at the same index, so `bias` must be at least as large as `output`; the call at "
    "tests/faulty_programs/mojo_oob_read.py:16 passes `output` [256, 256] and `bias` [2, 2]",
    # a NumPy array's pointer as a kernel's float*: CUDA_ERROR_ILLEGAL_ADDRESS at the next sync
    "hostptr_cudacore": "the launch of ",
}


@pytest.mark.parametrize("program", sorted(ON_THE_H100))
def test_on_the_h100_the_call_is_named_although_the_process_dies(program: str) -> None:
    """Recorded on the H100 with `gpudoctor run --json` (docs/call-checks.md says how), read through today's
    knowledge: the mismatch written before the call survives the crash and leads the report."""
    from gpudoctor.knowledge import match_findings
    from gpudoctor.report.files import read_report

    path = RECORDED / f"{RECORDING[program]}.json"
    report = read_report(path)
    findings = [f for f in match_findings(report) if f.id in (
        "custom-op-call-does-not-match-declaration", "kernel-launch-given-host-address")]  # fmt: skip
    assert findings and findings[0].evidence[0].startswith(ON_THE_H100[program]), findings
