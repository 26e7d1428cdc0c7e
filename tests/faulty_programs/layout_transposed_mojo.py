# A correct element-wise Mojo op (hostcrash_mojo_ops/add_one.mojo) given a transposed view on the GPU: MAX reads
# its storage as if it were contiguous and returns wrong values with no error (on the CPU MAX 26.7 refuses the view);
# the program's own check of the result fails.
from pathlib import Path

import torch
from max.experimental.torch import CustomOpLibrary

ops = CustomOpLibrary(Path(__file__).resolve().parent / "hostcrash_mojo_ops")
x = torch.arange(64 * 64, dtype=torch.float32, device="cuda").reshape(64, 64)
out = torch.empty(64, 64, device="cuda")
ops.add_one(out, x.t())
torch.cuda.synchronize()
assert torch.equal(out, x.t() + 1), f"add_one gave {out[0, :4].tolist()}, expected {(x.t() + 1)[0, :4].tolist()}"
print("ok")
