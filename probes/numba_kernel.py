"""Probe numba-cuda: a @cuda.jit kernel compiled by numba-cuda (NVVM, then the driver or nvJitLink) and launched on
the GPU on a torch tensor (through __cuda_array_interface__), values checked.

Run by hand: python probes/numba_kernel.py --device cuda
"""

from _harness import run_probe


def main(ctx):
    ctx.step("import numba.cuda")
    try:
        from numba import cuda
    except ImportError as error:
        if "numba" in str(error) and "No module named" in str(error):
            ctx.skip("numba-cuda is not installed")
        raise
    import numba

    ctx.detail("numba", numba.__version__)

    @cuda.jit
    def add_one(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] + 1

    ctx.step("import torch")
    import torch

    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    ctx.step("compile (NVVM) and launch a numba-cuda kernel on torch tensors")
    add_one[(x.numel() + 255) // 256, 256](cuda.as_cuda_array(x), cuda.as_cuda_array(y))
    cuda.synchronize()
    ctx.check(torch.equal(y.cpu(), x.cpu() + 1), "the numba kernel computed %r for arange + 1" % (y[:4].tolist(),))
    return "numba-cuda (numba %s) compiles and runs a kernel on torch tensors" % numba.__version__


run_probe("numba-cuda", main, devices=("cuda",))
