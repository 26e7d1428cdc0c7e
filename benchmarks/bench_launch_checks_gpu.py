"""On a GPU machine: what the call checks cost per launch (issue 50) against the launch itself, with the real Triton
and CuPy — a Triton `kernel[grid](...)` and a CuPy RawKernel launch of the same small element-wise kernel, timed
without the checks and then with them (`gpudoctor.calls.install_launches`, mode "record"), each as the median of
ROUNDS rounds of CALLS launches (queued, one synchronisation per round). Prints figures; asserts nothing.

    python benchmarks/bench_launch_checks_gpu.py [--calls 2000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable


def _per_launch(launch: Callable[[], None], sync: Callable[[], None], calls: int, rounds: int) -> float:
    launch()
    sync()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            launch()
        sync()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    import cupy as cp
    import torch
    import triton
    import triton.language as tl

    from gpudoctor.calls import install_launches
    from gpudoctor.calls.channel import FILE_ENV, Mode

    os.environ[FILE_ENV] = os.path.join(tempfile.mkdtemp(prefix="gpudoctor-bench-"), "events.jsonl")

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    n = 4096
    x, y, out = (torch.ones(n, device="cuda") for _ in range(3))
    source = 'extern "C" __global__ void add(const float* x, const float* y, float* out, int n) {' \
             " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = x[i] + y[i]; }"  # fmt: skip
    cx, cy, cout = (cp.ones(n, dtype=cp.float32) for _ in range(3))
    grid = (triton.cdiv(n, 1024),)
    bare_cupy = cp.RawKernel(source, "add")

    def triton_launch() -> None:
        add_kernel[grid](x, y, out, n, BLOCK=1024)

    def cupy_launch(kernel: object) -> Callable[[], None]:
        return lambda: kernel((n // 256,), (256,), (cx, cy, cout, cp.int32(n)))  # type: ignore[operator]

    figures = {
        "triton bare": _per_launch(triton_launch, torch.cuda.synchronize, args.calls, args.rounds),
        "cupy bare": _per_launch(cupy_launch(bare_cupy), cp.cuda.Device().synchronize, args.calls, args.rounds),
    }
    install_launches(triton, Mode.RECORD)
    install_launches(cp, Mode.RECORD)
    checked_cupy = cp.RawKernel(source, "add")  # made after the install: the checked class
    figures["triton checked"] = _per_launch(triton_launch, torch.cuda.synchronize, args.calls, args.rounds)
    figures["cupy checked"] = _per_launch(cupy_launch(checked_cupy), cp.cuda.Device().synchronize, args.calls,
                                          args.rounds)  # fmt: skip
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}, "
          f"CuPy {cp.__version__}; {args.rounds} rounds of {args.calls} launches (median), µs per launch:")  # fmt: skip
    for stack in ("triton", "cupy"):
        bare, checked = figures[f"{stack} bare"], figures[f"{stack} checked"]
        print(f"  {stack:<7} launch {bare:7.1f}   with the checks {checked:7.1f}   the checks {checked - bare:6.1f} "
              f"({(checked - bare) / bare:+.0%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
