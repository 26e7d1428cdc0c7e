"""Triton and CuPy kernel launches checked before they proceed (gpudoctor.calls: signature, triton_launches,
cupy_launches, launch_wrap): the C signature reader, each check's sentence and its silence on correct launches, the
wrapping of each library's launch path, under the start-up hook and `gpudoctor run`. Neither Triton nor CuPy can run
here (no CUDA GPU; Triton is not installed): their launch paths are stand-ins shaped as the real ones are
(tests/launch_checks/standins); tensors are real torch tensors where the CPU will do."""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from conftest import ROOT, validate_report

from gpudoctor.calls import CallMismatch, CallNotCheckedWarning, Mode, channel, install_launches, launch_wrap
from gpudoctor.calls.cupy_launches import check_cupy_launch
from gpudoctor.calls.signature import Signature, Unreadable, read_signature
from gpudoctor.calls.triton_launches import check_triton_launch, tensor_subclass
from gpudoctor.report.codec import decode

STANDINS = ROOT / "tests" / "launch_checks" / "standins"
SITE = "prog.py:31"
SCALE = r"""
#include <cuda_fp16.h>
// __global__ void scale(int not_this_one)  (a comment)
extern "C" __global__ void __launch_bounds__(256) scale(const float* __restrict__ x, float s, int n,
                                                         float *out, long long total, const char* label) {
    const char* said = "__global__ void scale(double)";
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = s * x[i];
}
"""


def _no_driver(_: int) -> bool | None:
    return None


def _no_maps() -> str:
    return ""


class OnGpu:
    """An array or tensor said to be on a GPU, which this machine has not: a dtype, a device, an address."""

    __module__ = "cupy._core.core"

    def __init__(self, dtype: str, device: str = "cuda:0") -> None:
        self.dtype, self.device = np.dtype(dtype), device

    def data_ptr(self) -> int:
        return 1 << 40

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"data": (1 << 40, False)}


def _cupy(signature: Signature, *args: Any) -> str | None:
    found = check_cupy_launch(signature, args, SITE, "line 4 of its source", _no_driver, _no_maps)
    return found.sentence if found is not None else None


# --- the signature reader -----------------------------------------------------------------------------------------


def test_the_signature_reader_reads_each_parameter_past_comments_strings_and_attributes() -> None:
    signature = read_signature(SCALE, "scale")
    assert signature.line == 4
    assert [(p.name, p.base, p.depth, p.dtype) for p in signature.parameters] == [
        ("x", "float", 1, "float32"), ("s", "float", 0, "float32"), ("n", "int", 0, "int32"),
        ("out", "float", 1, "float32"), ("total", "long long", 0, "int64"), ("label", "char", 1, "int8"),
    ]  # fmt: skip
    module = 'extern "C" {\n__global__ void a(unsigned int* v, size_t n) {}\n__global__ void b(void) {}\n}\n'
    assert read_signature(module, "a").written == "a(unsigned int* v, size_t n)"
    assert read_signature(module, "b").parameters == ()
    assert read_signature("__global__ void c(float x[], Params p) {}", "c").written == "c(float* x, Params p)"
    assert not read_signature("__global__ void c(float x[], Params p) {}", "c").parameters[1].known


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("template<typename T>\n__global__ void f(T* x, int n) {}", "`f` is a template kernel"),
        ('extern "C" __global__ void g(float* x) {}', "declares no `__global__ void f(...)`"),
        ("#define K(name) __global__ void name(float* x) {}\nK(f)", "declares no `__global__ void f(...)`"),
        ("__global__ void f(float* x) {}\n__global__ void f(double* x) {}", "declares `f` 2 times (overloads)"),
        ("__global__ void f(float& x) {}", "`f`'s parameter `float& x` is not one the signature reader follows"),
        ("__global__ void f(float* x, int n = 3) {}", "`f`'s parameter `int n = 3` is not one"),
        ("__global__ void f(float* x, int n {}", "`f`'s parameter list does not close"),
    ],
)
def test_what_the_reader_cannot_read_is_one_sentence(source: str, said: str) -> None:
    with pytest.raises(Unreadable, match=None) as raised:
        read_signature(source, "f")
    assert said in str(raised.value) and "\n" not in str(raised.value)


# --- the CuPy check -----------------------------------------------------------------------------------------------


def test_each_cupy_mistake_is_one_sentence_with_the_parameter_and_the_fix() -> None:
    scale = read_signature(SCALE, "scale")
    x, out, label = OnGpu("float32"), OnGpu("float32"), OnGpu("uint8")
    start = f"the launch of `scale` at {SITE} passes "
    assert _cupy(scale, x, 2.5, np.int32(4), out, 4, label) == (
        start + "a Python float (passed as a double) for `float s` (line 4 of its source): the kernel reads 4 of its "
        "8 bytes as a float: the low half of a double, a wrong value; pass `cp.float32(s)`")  # fmt: skip
    assert _cupy(scale, np.arange(4, dtype=np.float32), np.float32(2), np.int32(4), out, 4, label) == (
        start + "a NumPy array (float32, host memory) for `float* x` (line 4 of its source): the kernel reads device "
        "memory, and this is host memory (CuPy 14 refuses a NumPy array larger than one element: 'Only "
        "numpy.ndarrays of size one can be passed by value', naming no parameter); pass `cp.asarray(x)`")  # fmt: skip
    assert _cupy(scale, OnGpu("float64"), np.float32(2), np.int32(4), out, 4, label) == (
        start + "an array of float64 for `float* x` (line 4 of its source): the kernel reads its elements as float32, "
        "4 bytes each, from 8-byte float64 values: every element it reads is wrong; pass "
        "`x.astype(cp.float32)`")  # fmt: skip
    assert _cupy(scale, x, np.float32(2), 1 << 33, out, 4, label) == (
        start + "a Python int (passed as a 64-bit integer) for `int n` (line 4 of its source): the kernel reads the "
        "low 4 of its 8 bytes, and 8589934592 does not fit in `int`: it reads 0; pass `cp.int32(n)`")  # fmt: skip
    assert _cupy(scale, x, np.float32(2), np.int32(4), out, np.int32(4), label) == (
        start + "np.int32 for `long long total` (line 4 of its source): the kernel reads 8 bytes from a 4-byte value: "
        "the bytes past it are garbage; pass `cp.int64(total)`")  # fmt: skip
    assert "the kernel reads an integer's bits as a float" in str(_cupy(scale, x, 2, np.int32(4), out, 4, label))
    assert "passes torch" not in str(_cupy(scale, torch.ones(4), np.float32(2), np.int32(4), out, 4, label))
    assert "a tensor on the CPU (float32)" in str(_cupy(scale, torch.ones(4), np.float32(2), 4, out, 4, label))
    assert _cupy(scale, x, np.float32(2)) == (
        f"the launch of `scale` at {SITE} passes 2 arguments; `scale(float* x, float s, int n, float* out, long long "
        "total, char* label)` (line 4 of its source) takes 6: the driver reads each parameter from the arguments in "
        "order, so a missing one is read from memory past them")  # fmt: skip


def test_correct_cupy_launches_pass_as_they_are() -> None:
    """What CuPy passes right: exact NumPy scalars, a Python int that fits an int (its low bytes are the value), a
    Python int for a long long, the other sign of the same width, any array for a char*, null pointers."""
    scale = read_signature(SCALE, "scale")
    x, out = OnGpu("float32"), OnGpu("float32")
    for args in [
        (x, np.float32(2), np.int32(4), out, 4, OnGpu("uint8")),
        (x, np.float32(2), 4, out, 1 << 40, OnGpu("float64")),
        (x, cp_float(2), np.uint32(4), None, np.int64(4), None),
    ]:
        assert _cupy(scale, *args) is None, args
    unsigned = read_signature("__global__ void f(int* v, double d, bool b) {}", "f")
    assert _cupy(unsigned, OnGpu("uint32"), 2.5, True) is None


def cp_float(value: float) -> np.float32:
    return np.float32(value)


def test_a_host_address_for_a_pointer_is_named_by_the_drivers_pointer_attributes() -> None:
    buffer = ctypes.create_string_buffer(1 << 16)
    address = ctypes.addressof(buffer)
    scale = read_signature(SCALE, "scale")
    maps = Path("/proc/self/maps").read_text
    found = check_cupy_launch(scale, (address, np.float32(1), 4, OnGpu("float32"), 4, None), SITE, "line 4",
                              lambda _: False, maps)  # fmt: skip
    assert found is not None and f"passes {address:#x}, a host address (in " in found.sentence
    known = check_cupy_launch(scale, (address, np.float32(1), 4, OnGpu("float32"), 4, None), SITE, "line 4",
                              lambda _: True, maps)  # fmt: skip
    assert known is None


# --- the Triton check ---------------------------------------------------------------------------------------------

NAMES = ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"]


def test_a_triton_launch_on_two_devices_names_both_parameters_and_both_devices() -> None:
    start = f"the launch of `add_kernel` at {SITE} passes "
    args = (OnGpu("float32", "cuda:0"), OnGpu("float32", "cuda:1"), OnGpu("float32", "cuda:0"), 4)
    two = check_triton_launch("add_kernel", NAMES, args, {"BLOCK": 1024, "num_warps": 4}, "cuda:0", SITE)
    assert two is not None and two.sentence == (
        start + "`x_ptr` on cuda:0 and `y_ptr` on cuda:1: Triton launches on one device (cuda:0, the current one) and "
        "every tensor must be on it; Triton's own message for it says 'cannot be accessed from Triton (cpu tensor?)', "
        'although no tensor is on the CPU; move the tensor passed as `y_ptr` to cuda:0: `.to("cuda:0")`')  # fmt: skip
    assert two.to_event()["kind"] == "triton-devices" and two.argument == "y_ptr"
    cpu = check_triton_launch("add_kernel", NAMES, (OnGpu("float32"),), {"y_ptr": torch.ones(4)}, None, SITE)
    assert cpu is not None and cpu.sentence.startswith(start + "`x_ptr` on cuda:0 and `y_ptr` on cpu: a Triton kernel")
    # every tensor on one GPU other than the current device: recorded on two H200s, Triton 3.6 ran such a launch
    # without an error (tests/fixtures/h200x2-launches): no mismatch is claimed
    away = check_triton_launch("add_kernel", NAMES, (OnGpu("f4", "cuda:1"), OnGpu("f4", "cuda:1")), {}, "cuda:0", SITE)
    assert away is None


def test_a_triton_launch_on_one_device_passes_and_a_tensor_subclass_is_said_once() -> None:
    same = (OnGpu("float32", "cuda:1"), OnGpu("float32", "cuda:1"), OnGpu("float32", "cuda:1"), 4)
    assert check_triton_launch("add_kernel", NAMES, same, {"BLOCK": 8}, "cuda:1", SITE) is None
    assert check_triton_launch("add_kernel", NAMES, (torch.ones(2), torch.ones(2)), {}, None, SITE) is None

    class Wrapped(torch.Tensor):
        pass

    notes: list[str] = []
    wrapped = torch.ones(2).as_subclass(Wrapped)
    args = (wrapped, OnGpu("float32", "cuda:1"))
    assert check_triton_launch("add_kernel", NAMES, args, {}, "cuda:1", SITE, note=notes.append) is None
    assert notes == ["`x_ptr` of `add_kernel` is a test_a_triton_launch_on_one_device_passes_and_a_tensor_subclass_is"
                     "_said_once.<locals>.Wrapped (a tensor subclass): its device is not checked"]  # fmt: skip
    assert tensor_subclass(torch.nn.Parameter(torch.ones(1))) is None and tensor_subclass(torch.ones(1)) is None


# --- wrapped inside the program -----------------------------------------------------------------------------------


@pytest.fixture
def standins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The stand-in Triton and CuPy importable, fresh; the launch settings of this process reset; events to a file."""
    monkeypatch.syspath_prepend(str(STANDINS))
    for name in [m for m in sys.modules if m.split(".")[0] in ("triton", "cupy")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(launch_wrap, "_SETTINGS", None)
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv(channel.FILE_ENV, str(events))
    yield events


def _import(name: str) -> ModuleType:
    return importlib.import_module(name)


def test_triton_launches_are_checked_at_the_programs_line_and_left_as_they_are(standins: Path) -> None:
    triton = _import("triton")
    install_launches(triton, Mode.RAISE)

    def add_kernel(x_ptr: Any, y_ptr: Any, out_ptr: Any, n: int, BLOCK: int) -> None:
        pass

    kernel = triton.jit(add_kernel)
    batch, weights = OnGpu("float32", "cuda:0"), OnGpu("float32", "cuda:1")
    with pytest.raises(CallMismatch) as raised:
        kernel[(1,)](batch, weights, batch, 4, BLOCK=1024)
    line = sys._getframe().f_lineno - 1
    at = f"tests/test_launch_checks.py:{line}"
    assert f"the launch of `add_kernel` at {at} passes `x_ptr` on cuda:0 and `y_ptr` on cuda:1" in str(raised.value)
    assert kernel.launches == 0  # raised instead of the launch
    kernel[(1,)](batch, batch, batch, 4, BLOCK=1024)
    kernel.run(batch, weights, batch, 4, BLOCK=1024, grid=(1,), warmup=True)  # a warm-up launches nothing
    assert kernel.launches == 1
    event = json.loads(standins.read_text().splitlines()[0])
    assert event["event"] == "mismatch" and event["kind"] == "triton-devices" and event["argument"] == "y_ptr"


def test_cupy_kernels_and_module_functions_are_checked_and_what_cannot_be_read_is_said_once(standins: Path) -> None:
    cupy = _import("cupy")
    install_launches(cupy, Mode.RAISE)
    scale = cupy.RawKernel(SCALE, "scale")
    x, out = cupy.asarray([1.0], cupy.float32), cupy.asarray([0.0], cupy.float32)
    with pytest.raises(CallMismatch, match=r"passes a Python float \(passed as a double\) for `float s`"):
        scale((1,), (32,), (x, 2.0, cupy.int32(1), out, 1, None))
    scale((1,), (32,), (x, cupy.float32(2.0), cupy.int32(1), out, 1, None))
    assert scale.launched == [(x, np.float32(2.0), 1, out, 1, None)]
    module = cupy.RawModule(code=SCALE)
    with pytest.raises(CallMismatch, match="passes an array of float64 for `float\\* x`"):
        module.get_function("scale")((1,), (32,), (cupy.asarray([1.0], cupy.float64), cupy.float32(2), 1, out, 1, None))
    template = cupy.RawKernel("template<typename T>\n__global__ void f(T* x) {}", "f")
    with pytest.warns(CallNotCheckedWarning, match="`f` is a template kernel"):
        template((1,), (1,), (x, 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        template((1,), (1,), (x, 2.0))  # said once; the launch goes on
    assert len(template.launched) == 2
    named = cupy.RawModule(code="template<typename T> __global__ void f(T* x) {}", name_expressions=["f<float>"])
    with pytest.warns(CallNotCheckedWarning, match="RawModule with name_expressions"):
        named.get_function("f<float>")


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpudoctor", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("program", "finding", "sentence"),
    [
        ("triton_program.py", "triton-launch-tensors-on-other-devices",
         "the launch of `add_kernel` at tests/launch_checks/triton_program.py:20 passes `x_ptr` on cuda:0 and "
         "`y_ptr` on cuda:1"),
        ("cupy_program.py", "cupy-kernel-arguments-do-not-match-signature",
         "the launch of `scale` at tests/launch_checks/cupy_program.py:16 passes a Python float (passed as a double) "
         "for `float s` (line 2 of its source)"),
    ],
)  # fmt: skip
def test_under_gpudoctor_run_the_launch_leads_the_report(program: str, finding: str, sentence: str) -> None:
    """The start-up hook wraps the stand-in library when the program imports it; the report leads with the launch,
    not with the library's own message or the program's assertion."""
    python_path = os.pathsep.join([str(STANDINS), str(ROOT / "src")])
    completed = _run("run", "--json", "--no-debugger", "--", "python", f"tests/launch_checks/{program}",
                     env={**os.environ, "PYTHONPATH": python_path})  # fmt: skip
    assert completed.returncode == 1, completed.stderr[-3000:]
    document = json.loads(completed.stdout)
    validate_report(document)
    leading, _ = decode(document).findings_in_order()
    assert leading[0].id == finding, [f.id for f in leading]
    assert leading[0].evidence[0].startswith(sentence), leading[0].evidence
