"""A Python float for a `float` parameter, launched through the CuPy stand-in (standins/cupy); then the program's own
check of its result fails, as it does on a GPU where the kernel read the low half of a double."""

import cupy as cp

scale = cp.RawKernel(
    r"""
extern "C" __global__ void scale(const float* x, float s, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = s * x[i];
}
""",
    "scale",
)
x, out = cp.asarray([1.0, 2.0], dtype=cp.float32), cp.asarray([0.0, 0.0], dtype=cp.float32)
scale((1,), (32,), (x, 2.5, out, cp.int32(2)))
assert out.host[1] == 5.0, f"out[1] = {out.host[1]}"
