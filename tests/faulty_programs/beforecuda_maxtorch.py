# Written for MAX 25.x: `from max.torch import CustomOpLibrary`; MAX 26.x moved the PyTorch bridge to
# max.experimental.torch, so the program fails at its imports, before any CUDA call.
from pathlib import Path

import torch
from max.torch import CustomOpLibrary

ops = CustomOpLibrary(Path(__file__).resolve().parent / "hostcrash_mojo_ops")
x = torch.ones(64, 64, device="cuda")
out = torch.empty_like(x)
ops.add_one(out, x)
torch.cuda.synchronize()
print("ok", torch.equal(out, x + 1))
