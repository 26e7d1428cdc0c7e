"""Seed 000's reproducer, as its reporter would write it: a trivial custom op (`output[0, 0] = input[0, 0]` in
`execute`) called through CustomOpLibrary. Fine on the CPU; on CUDA the process dies of SIGSEGV with no Python
exception (the host dereferences device memory).

    python repro.py [cpu|cuda]
"""

import sys
from pathlib import Path

import torch
from max.torch import CustomOpLibrary

device = sys.argv[1] if len(sys.argv) > 1 else "cuda"
ops = CustomOpLibrary(Path(__file__).parent / "kernels")
x = torch.arange(4, dtype=torch.float32, device=device).reshape(2, 2)
out = torch.zeros_like(x)
ops.copy_first(out, x)
if device == "cuda":
    torch.cuda.synchronize()
print("ok", out[0, 0].item())
