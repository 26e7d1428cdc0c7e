# A Python float passed for the kernel's `float` parameter: CuPy passes a Python float as a double, and the kernel
# reads the low 4 of its 8 bytes as a float (2.5's are all zero bits: it multiplies by 0.0), so every output is wrong
# and the program's own check fails; nothing raises. The fix is `cp.float32(2.5)`.
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

n = 1 << 16
x = cp.arange(n, dtype=cp.float32)
out = cp.empty_like(x)
scale(((n + 255) // 256,), (256,), (x, 2.5, out, cp.int32(n)))
cp.cuda.Device().synchronize()
assert cp.allclose(out, 2.5 * x), f"out[1] = {float(out[1])}, expected 2.5"
print("ok")
