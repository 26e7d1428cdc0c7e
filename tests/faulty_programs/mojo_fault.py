# A Mojo custom op through CustomOpLibrary whose GPU kernel reads through a pointer taken from its output in
# `execute` (tests/kernels/adds_into): on the GPU the op dies with CUDA_ERROR_ILLEGAL_ADDRESS, reported by MAX when
# the program next waits for the device, not where it called the op.
from pathlib import Path

import torch

try:
    from max.torch import CustomOpLibrary
except ModuleNotFoundError:  # MAX 26.2 and later moved the bridge
    from max.experimental.torch import CustomOpLibrary

ops = CustomOpLibrary(Path(__file__).resolve().parent.parent / "kernels" / "adds_into")
x = torch.arange(16.0, device="cuda").reshape(4, 4)
out = torch.zeros_like(x)
ops.add_into(out, x)
y = out * 2
torch.cuda.synchronize()
print("ok", y.sum().item())
