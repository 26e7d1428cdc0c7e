"""Seed 002's case, as its reporter would write it: a custom op whose compile-time parameter has a default
(`factor: Int = 2`), called once with `op[{"factor": 3}]` and once leaving it to its default.

    python repro.py [cpu|cuda]
"""

import sys
from pathlib import Path

import torch
from max.torch import CustomOpLibrary

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
ops = CustomOpLibrary(Path(__file__).parent / "kernels")

x = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3)
tripled = torch.empty_like(x)
ops.scale[{"factor": 3}](tripled, x)
doubled = torch.empty_like(x)
ops.scale(doubled, x)  # the default, factor = 2
if device == "cuda":
    torch.cuda.synchronize()
assert torch.equal(tripled.cpu(), (x * 3).cpu()), f"factor=3 gave {tripled.tolist()}"
expected = (x * 2).tolist()
assert torch.equal(doubled.cpu(), (x * 2).cpu()), f"the default factor=2 gave {doubled.tolist()}, not {expected}"
print("both calls right")
