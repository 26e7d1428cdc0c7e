"""Probe cupy: a CuPy RawKernel compiled at run time by NVRTC and launched on the GPU, values checked; the CuPy
array is shared with torch through DLPack, as code mixing the two does.

Run by hand: python probes/cupy_kernel.py --device cuda
"""

from _harness import run_probe

KERNEL = r"""
extern "C" __global__ void add_one(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
"""


def main(ctx):
    ctx.step("import cupy")
    try:
        import cupy
    except ImportError as error:
        if "cupy" in str(error) and "No module named" in str(error):
            ctx.skip("CuPy is not installed (cupy-cuda12x, cupy-cuda13x)")
        raise
    ctx.detail("cupy", cupy.__version__)
    ctx.step("cupy.cuda.runtime: the CUDA runtime CuPy was built for")
    ctx.detail("cupy_cuda", cupy.cuda.runtime.runtimeGetVersion())
    ctx.step("RawKernel: compile with NVRTC and launch")
    kernel = cupy.RawKernel(KERNEL, "add_one")
    x = cupy.arange(1000, dtype=cupy.float32)
    y = cupy.empty_like(x)
    kernel(((x.size + 255) // 256,), (256,), (x, y, cupy.int32(x.size)))
    cupy.cuda.Device().synchronize()
    ctx.check(bool((y == x + 1).all()), "the RawKernel computed %r for arange + 1" % (y[:4].get().tolist(),))
    ctx.step("import torch; torch.from_dlpack(cupy array)")
    import torch

    shared = torch.from_dlpack(y)
    ctx.check(shared.device.type == "cuda" and float(shared[3]) == 4.0, "torch read %r through DLPack" % shared[:4])
    return "CuPy %s compiles a RawKernel with NVRTC and shares it with torch on the GPU" % cupy.__version__


run_probe("cupy", main, devices=("cuda",))
