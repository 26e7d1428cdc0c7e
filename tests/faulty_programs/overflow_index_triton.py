# A Triton kernel scaling a flattened tensor of 2.2e9 float16 values: its offsets `pid * BLOCK + tl.arange(0, BLOCK)`
# are int32, so past 2^31 elements `pid * BLOCK` wraps to a negative number, the mask (offs < n, n an int64) lets it
# through, and the load reads ~4 GiB before the tensor: an illegal memory access. (The fix: pid.to(tl.int64).)
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale, mask=mask)


n = 2_200_000_000
x = torch.ones(n, dtype=torch.float16, device="cuda")
out = torch.empty_like(x)
scale_kernel[(triton.cdiv(n, 1024),)](x, out, n, 0.5, BLOCK=1024)
torch.cuda.synchronize()
print("scaled", n, "values; last", out[-1].item())
