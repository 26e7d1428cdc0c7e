# A Triton kernel that scales each row of a matrix; the store uses the wrong row stride (the input's
# element count instead of its row length), as a user who mixed up two arguments writes it.
import torch
import triton
import triton.language as tl


@triton.jit
def scale_rows(x_ptr, out_ptr, n_cols, stride, scale, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask)
    tl.store(out_ptr + row * stride + cols, x * scale, mask=mask)


x = torch.randn(512, 1024, device="cuda")
out = torch.empty_like(x)
scale_rows[(x.shape[0],)](x, out, x.shape[1], x.numel(), 2.0, BLOCK=1024)
torch.cuda.synchronize()
print("max error", (out - 2 * x).abs().max().item())
