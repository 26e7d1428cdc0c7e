# A Triton kernel that forgets the mask on its load: the last block reads past the input. The values read
# come from torch's cached block, so the program prints a plausible result and exits 0.
import torch
import triton
import triton.language as tl


@triton.jit
def add_bias(x_ptr, bias_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs)  # no mask: reads past x in the last block
    tl.store(out_ptr + offs, x + tl.load(bias_ptr), mask=mask)


x = torch.randn(1000, device="cuda")
bias = torch.ones(1, device="cuda")
out = torch.empty_like(x)
add_bias[(triton.cdiv(1000, 256),)](x, bias, out, 1000, BLOCK=256)
torch.cuda.synchronize()
print("ok", torch.allclose(out, x + 1))
