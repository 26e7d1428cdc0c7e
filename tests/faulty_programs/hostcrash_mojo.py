# A correct element-wise Mojo op (hostcrash_mojo_ops/add_one.mojo) called through CustomOpLibrary with its output
# on the GPU and its input left on the CPU (torch.ones without device="cuda"): the process dies of SIGSEGV about
# half a minute in, printing nothing.
from pathlib import Path

import torch
from max.experimental.torch import CustomOpLibrary

ops = CustomOpLibrary(Path(__file__).resolve().parent / "hostcrash_mojo_ops")
x = torch.ones(64, 64)
out = torch.empty(64, 64, device="cuda")
ops.add_one(out, x)
torch.cuda.synchronize()
print("ok", out.sum().item())
