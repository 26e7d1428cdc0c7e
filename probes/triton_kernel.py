"""Probe triton: a tiny @triton.jit kernel compiled by Triton (its LLVM and ptxas) and launched on the GPU, values
checked — what torch.compile's Inductor and most hand-written GPU ops in PyTorch run on.

Run by hand: python probes/triton_kernel.py --device cuda
"""

import os

from _harness import run_probe


def main(ctx):
    ctx.step("import torch")
    import torch

    ctx.check(torch.cuda.is_available(), "torch.cuda.is_available() is False")
    ctx.step("import triton")
    import triton
    import triton.language as tl

    ctx.detail("triton", triton.__version__)
    ctx.detail("ptxas", os.environ.get("TRITON_PTXAS_PATH") or "bundled")

    @triton.jit
    def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)

    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    out = torch.empty_like(x)
    ctx.step("compile and launch a Triton kernel (LLVM -> PTX -> ptxas -> cubin)")
    add_one[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    torch.cuda.synchronize()
    ctx.check(torch.equal(out.cpu(), x.cpu() + 1), "the Triton kernel computed %r for arange + 1" % (out[:4].tolist(),))
    return "Triton %s compiles and runs a kernel on %s" % (triton.__version__, torch.cuda.get_device_name(0))


run_probe("triton", main, devices=("cuda",))
