"""The cpp-extension probe's build: cold (empty cache) and warm (the kept build only loaded), per device, alone and
with both variants at once as the doctor runs them; optionally the load_inline build it replaced. Prints figures;
asserts nothing.

Usage: python benchmarks/bench_cpp_extension.py [--devices cpu cuda] [--warm-runs 3] [--baseline]

Each run is the probe script in a fresh interpreter (as the doctor starts it) with its own empty
GPUDOCTOR_CACHE_DIR for "cold"; "build" is the seconds cpp_extension.load took (the probe's build_seconds),
"process" the whole run (interpreter start, import torch, build, load, call). --baseline times the previous
probe's way, load_inline with <torch/extension.h> in every source (nvcc over torch's headers), cold, in a fresh
folder, for comparison on the same machine.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "probes" / "cpp_extension.py"

# The previous probe's build (before issue 38): torch's headers in the binding and in the CUDA source.
_BASELINE = r"""
import sys, time
from torch.utils import cpp_extension
cpu = sys.argv[1] == "cpu"
head = "#include <torch/extension.h>\n"
kernel = head + '''
__global__ void add_one_kernel(const float* in, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}
torch::Tensor add_one(torch::Tensor x) {
  auto out = torch::empty_like(x);
  int64_t n = x.numel();
  add_one_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
  return out;
}
'''
started = time.monotonic()
if cpu:
    cpp_extension.load_inline(name="baseline_cpu", cpp_sources=head + "torch::Tensor add_one(torch::Tensor x) "
                              "{ return x + 1; }", functions=["add_one"], build_directory=sys.argv[2])
else:
    cpp_extension.load_inline(name="baseline_cuda", cpp_sources="torch::Tensor add_one(torch::Tensor x);",
                              cuda_sources=kernel, functions=["add_one"], build_directory=sys.argv[2])
print(round(time.monotonic() - started, 2))
"""


def run_probe(device: str, cache: Path) -> dict[str, Any]:
    """One run of the probe's ``device`` variant with ``cache``: its outcome, build seconds, cache hit, wall."""
    with tempfile.TemporaryDirectory() as scratch:
        channel = Path(scratch) / "result.jsonl"
        env = {**os.environ, "GPUDOCTOR_CACHE_DIR": str(cache), "GPUDOCTOR_RESULT_FILE": str(channel)}
        started = time.monotonic()
        subprocess.run([sys.executable, str(SCRIPT), "--device", device], env=env, capture_output=True, check=False)
        wall = time.monotonic() - started
        events = [json.loads(line) for line in channel.read_text().splitlines()] if channel.exists() else []
    result = next((e for e in events if e.get("event") == "result"), {"status": "no result", "details": {}})
    details = result.get("details", {})
    return {"status": result["status"], "summary": result.get("summary", ""), "wall": wall,
            "build": details.get("build_seconds"), "hit": details.get("cache_hit")}  # fmt: skip


def line(label: str, run: dict[str, Any]) -> str:
    if run["status"] != "pass":
        return f"  {label:<28} {run['status']}: {run['summary'][:150]}"
    return f"  {label:<28} build {run['build']:6.2f} s   process {run['wall']:6.2f} s   cache hit {run['hit']}"


def baseline(device: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", _BASELINE, device, folder], capture_output=True, text=True,
                              check=False)  # fmt: skip
        wall = time.monotonic() - started
    if done.returncode != 0:
        return f"  {'load_inline (before)':<28} failed: {done.stderr.strip().splitlines()[-1:]}"
    return f"  {'load_inline (before)':<28} build {float(done.stdout.split()[-1]):6.2f} s   process {wall:6.2f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", nargs="+", default=["cpu", "cuda"], choices=["cpu", "cuda"])
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--baseline", action="store_true", help="also time the previous load_inline build, cold")
    options = parser.parse_args()
    print(f"cpp-extension probe, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as scratch:
        for device in options.devices:
            print(f"{device}:")
            cache = Path(scratch) / f"alone-{device}"
            print(line("cold, alone", run_probe(device, cache)))
            warm = [run_probe(device, cache) for _ in range(options.warm_runs)]
            for index, run in enumerate(warm):
                print(line(f"warm {index + 1}", run))
            passed = [r for r in warm if r["status"] == "pass"]
            if passed:
                print(f"  {'warm median':<28} build {statistics.median(r['build'] for r in passed):6.2f} s   "
                      f"process {statistics.median(r['wall'] for r in passed):6.2f} s")  # fmt: skip
            if options.baseline:
                print(baseline(device))
        if len(options.devices) > 1:
            print("all variants at once, cold (as the doctor runs them):")
            together = Path(scratch) / "together"
            with ThreadPoolExecutor(len(options.devices)) as pool:
                runs = list(pool.map(lambda device: run_probe(device, together), options.devices))
            for device, run in zip(options.devices, runs, strict=True):
                print(line(device, run))


if __name__ == "__main__":
    main()
