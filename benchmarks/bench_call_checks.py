"""What the call checks (gpudoctor.calls) cost: per eager call of a real custom op on the CPU, the check beside the
call itself; and what the start-up hook adds to a program that makes no custom op.

Usage: python benchmarks/bench_call_checks.py [--calls N] [--rounds R] [--starts S]

Per call: one process with real torch and MAX makes tests/call_checks/ops's `plus_one` (float32 4x4, warmed up: its
graph compiled), then, in R interleaved rounds of N calls each, times the op called past the checks (MAX's own
``CustomOp.__call__``), the op called with the checks on (record mode, as under `gpudoctor run`), the check alone, and
a control: the call after a few microseconds of unrelated Python (json.dumps). Back to back, a few microseconds of
any Python between two MAX calls makes the next call ~20-40 us slower here (json.dumps does it as much as the check:
MAX's side, not the check's), so the call with the checks is compared with the control as much as with the bare call;
medians of the rounds.
Start-up: ``python -c pass`` and ``python -c "import torch"`` S times each, interleaved, with
and without the hook on PYTHONPATH (GPUDOCTOR_CALL_CHECKS=record); medians, and what the hooked process had imported.
Goal (issue 45): a few percent of a call at most; nothing added to a program that makes no custom op.
Per launch (issue 50): a Triton launch (3 tensors and an int, through ``kernel[grid](...)``) and a CuPy RawKernel
launch (3 arrays and an int), in this process through the stand-ins of tests/launch_checks/standins (neither a CUDA
Triton nor CuPy runs here): the stand-in launch past the checks and with them (record mode), and the check alone;
medians of R rounds of N launches. The stand-in launches do nothing, so the difference is what the checks add to a
real launch (Triton's own launch overhead is tens of microseconds, CuPy's a few).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpudoctor.calls import channel  # noqa: E402

PER_CALL = r"""
import json, statistics, sys, time
from pathlib import Path
import torch
from max.experimental.torch import CustomOpLibrary
from gpudoctor.calls import wrap
from gpudoctor.calls.channel import Mode

calls, rounds = int(sys.argv[1]), int(sys.argv[2])
ops = CustomOpLibrary(Path(sys.argv[3]))
x, out = torch.ones(4, 4), torch.empty(4, 4)
op = ops.plus_one
op(out, x)  # compiled here, before any timing
wrap.install(sys.modules["max.experimental.torch"], Mode.RECORD)
op(out, x)
bare = type(op).__call__.__wrapped__
checks = op.__dict__["_gpudoctor_calls_state"]
frame = sys._getframe()

def bare_call(): bare(op, out, x)
def checked_call(): op(out, x)
def check_alone(): checks.before((out, x), {}, frame)
def other_then_call(): json.dumps({"a": [1, 2, 3], "b": "x" * 10}); bare(op, out, x)

timed = {"bare": [], "checked": [], "check": [], "other": []}
for _ in range(rounds):
    for name, function in (("bare", bare_call), ("checked", checked_call), ("check", check_alone),
                           ("other", other_then_call)):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        timed[name].append((time.perf_counter() - start) / calls * 1e6)
print(json.dumps({name: statistics.median(values) for name, values in timed.items()}))
"""

PROBE_IMPORTS = "import sys; print(sorted(m for m in ('gpudoctor', 'torch', 'max', 'json') if m in sys.modules))"


def per_call(calls: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        python_path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, channel.FILE_ENV: str(Path(folder) / "events.jsonl"),
               "MODULAR_MAX_ENABLE_MODEL_IR_CACHE": "1", "PYTHONPATH": python_path}  # fmt: skip
        done = subprocess.run([sys.executable, "-c", PER_CALL, str(calls), str(rounds),
                               str(ROOT / "tests" / "call_checks" / "ops")],
                              capture_output=True, text=True, env=env, check=True)  # fmt: skip
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _start(code: str, hooked: bool) -> float:
    env = dict(os.environ)
    if hooked:
        with tempfile.NamedTemporaryFile(suffix=".jsonl") as events:
            env.update(channel.environment(os.environ, Path(events.name)))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def start_up(starts: int) -> dict[str, float]:
    timed: dict[str, list[float]] = {}
    for _ in range(starts):
        for code, label in (("pass", "python -c pass"), ("import torch", "python -c 'import torch'")):
            for hooked in (False, True):
                timed.setdefault(f"{label}{' + hook' if hooked else ''}", []).append(_start(code, hooked))
    return {name: statistics.median(values) * 1e3 for name, values in timed.items()}


def per_launch(calls: int, rounds: int) -> dict[str, float]:
    """The launch checks' cost per launch, through the stand-in Triton and CuPy (see the module's docstring)."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests" / "launch_checks" / "standins"))
    import cupy  # the stand-in
    import triton  # the stand-in

    from gpudoctor.calls import Mode, launch_wrap

    class OnGpu:
        __module__ = "cupy._core.core"

        def __init__(self, dtype: str) -> None:
            self.dtype, self.device = np.dtype(dtype), "cuda:0"

        def data_ptr(self) -> int:
            return 1 << 40

        @property
        def __cuda_array_interface__(self) -> dict[str, object]:
            return {"data": (1 << 40, False)}

    def add_kernel(x_ptr: object, y_ptr: object, out_ptr: object, n: int, BLOCK: int) -> None:
        pass

    bare_run = triton.runtime.jit.JITFunction.run
    bare_kernel_class = cupy.RawKernel
    source = 'extern "C" __global__ void scale(const float* x, const float* y, float* out, int n) {}'
    x, y, out, n = OnGpu("float32"), OnGpu("float32"), OnGpu("float32"), np.int32(4)
    bare_triton, bare_cupy = triton.jit(add_kernel), bare_kernel_class(source, "scale")
    with tempfile.TemporaryDirectory() as folder:
        os.environ[channel.FILE_ENV] = str(Path(folder) / "events.jsonl")
        launch_wrap.install_launches(triton, Mode.RECORD)
        launch_wrap.install_launches(cupy, Mode.RECORD)
        checked_triton, checked_cupy = triton.jit(add_kernel), cupy.RawKernel(source, "scale")
        frame = sys._getframe()
        checked_cupy((1,), (32,), (x, y, out, n))  # its signature read once, here
        signature = checked_cupy.__dict__["_gpudoctor_calls_signature"]

        def triton_bare() -> None:
            bare_run(bare_triton, x, y, out, 4, BLOCK=1024, grid=(1,), warmup=False)

        def triton_checked() -> None:
            checked_triton[(1,)](x, y, out, 4, BLOCK=1024)

        def triton_check() -> None:
            launch_wrap._before_triton(checked_triton, (x, y, out, 4), {"BLOCK": 1024}, frame)

        def cupy_bare() -> None:
            bare_cupy((1,), (32,), (x, y, out, n))

        def cupy_checked() -> None:
            checked_cupy((1,), (32,), (x, y, out, n))

        def cupy_check() -> None:
            launch_wrap.check_cupy_launch(signature, (x, y, out, n), "prog.py:1", "line 1", lambda _: None, str)

        timed: dict[str, list[float]] = {}
        functions = {"triton bare": triton_bare, "triton checked": triton_checked, "triton check": triton_check,
                     "cupy bare": cupy_bare, "cupy checked": cupy_checked, "cupy check": cupy_check}  # fmt: skip
        for _ in range(rounds):
            for name, function in functions.items():
                start = time.perf_counter()
                for _ in range(calls):
                    function()
                timed.setdefault(name, []).append((time.perf_counter() - start) / calls * 1e6)
        del os.environ[channel.FILE_ENV]
    return {name: statistics.median(values) for name, values in timed.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--starts", type=int, default=15)
    parser.add_argument("--launches-only", action="store_true", help="only the Triton and CuPy launch checks")
    options = parser.parse_args()
    launches = per_launch(options.calls, options.rounds)
    print(f"per launch through the stand-ins (median of {options.rounds} rounds of {options.calls} launches):")
    for kind, what in (("triton", "Triton kernel[grid](3 tensors, int)"), ("cupy", "CuPy RawKernel (3 arrays, int)")):
        bare, checked, alone = (launches[f"{kind} {part}"] for part in ("bare", "checked", "check"))
        print(f"  {what}: past the checks {bare:6.2f} us, with them {checked:6.2f} us, the check alone {alone:6.2f} us")
    if options.launches_only:
        return
    costs = per_call(options.calls, options.rounds)
    print(f"per eager call of plus_one on the CPU (float32 4x4; median of {options.rounds} rounds of "
          f"{options.calls} calls):")  # fmt: skip
    print(f"  the call past the checks   {costs['bare']:8.1f} us")
    print(f"  the call with the checks   {costs['checked']:8.1f} us")
    print(f"  the check alone            {costs['check']:8.2f} us  ({costs['check'] / costs['bare'] * 100:.2f} % "
          "of the call)")  # fmt: skip
    print(f"  control: the call after a json.dumps of a small dict (a few us of any Python between two calls) "
          f"{costs['other']:.1f} us")  # fmt: skip
    times = start_up(options.starts)
    print(f"start-up (median of {options.starts}):")
    for name, ms in times.items():
        print(f"  {name:<36} {ms:7.1f} ms")
    env = dict(os.environ)
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as events:
        env.update(channel.environment(os.environ, Path(events.name)))
        seen = subprocess.run([sys.executable, "-c", PROBE_IMPORTS], env=env, capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
    print(f"  imported by the hook in a program that makes no custom op (of gpudoctor, torch, max, json): {seen}")


if __name__ == "__main__":
    main()
