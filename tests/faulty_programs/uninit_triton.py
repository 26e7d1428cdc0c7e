# A Triton kernel meant to write out = x * scale adds into its output instead (out += x * scale), and the output
# comes from torch.empty_like: the first call may get fresh (zeroed) memory and pass; later calls get a block the
# caching allocator hands back with old values in it, and the result is wrong.
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(out_ptr, x_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    acc = tl.load(out_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, acc + x * scale, mask=mask)


def scaled(x, scale):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 1024),)](out, x, n, scale, BLOCK=1024)
    return out


for step in range(4):
    x = torch.randn(1 << 20, device="cuda")
    y = scaled(x, 2.0)
    assert torch.allclose(y, 2 * x), f"step {step}: max error {(y - 2 * x).abs().max().item()}"
print("ok")
