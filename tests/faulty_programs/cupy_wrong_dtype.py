# An array of float64 (CuPy's default for cp.random.rand) passed for the kernel's `const float*`: the kernel reads
# the 8-byte doubles as pairs of 4-byte floats, so every element it reads is wrong (and it reads only the first half
# of the data); the program's own check fails, nothing raises. The fix is `x.astype(cp.float32)`.
import cupy as cp

scale = cp.RawKernel(
    r"""
extern "C" __global__ void scale(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
""",
    "scale",
)

n = 1 << 16
x = cp.random.rand(n)  # float64
out = cp.empty(n, dtype=cp.float32)
scale(((n + 255) // 256,), (256,), (x, out, cp.int32(n)))
cp.cuda.Device().synchronize()
assert cp.allclose(out, 2 * x, atol=1e-5), f"max error {float(cp.abs(out - 2 * x).max())}"
print("ok")
