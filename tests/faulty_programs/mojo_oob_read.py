# A Mojo custom op through CustomOpLibrary whose foreach reads its 2x2 bias with the 256x256 output's indices: past
# the bias. On the GPU the reads land in torch's cached block, so the program prints a result and exits 0.
from pathlib import Path

import torch

try:
    from max.torch import CustomOpLibrary
except ModuleNotFoundError:  # MAX 26.2 and later moved the bridge
    from max.experimental.torch import CustomOpLibrary

ops = CustomOpLibrary(Path(__file__).resolve().parent.parent / "kernels" / "oob_read")
x = torch.randn(256, 256, device="cuda")
bias = torch.ones(2, 2, device="cuda")
out = torch.empty_like(x)
ops.add_bias(out, x, bias)
torch.cuda.synchronize()
print("ok", torch.allclose(out, x + 1))
