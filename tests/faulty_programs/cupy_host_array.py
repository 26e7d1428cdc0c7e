# The samples read from disk with NumPy and passed to the kernel as they are: a NumPy array (host memory) where the
# kernel's `const float*` needs device memory. CuPy 14.2 refuses it at the launch ("TypeError: You are trying
# to pass a numpy.ndarray of shape (65536,) as a kernel parameter. Only numpy.ndarrays of size one can be passed by
# value"), naming neither the parameter nor the fix; the call checks (issue 50) name `x` and
# `cp.asarray(x)` before the launch.
import cupy as cp
import numpy as np

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
samples = np.linspace(0.0, 1.0, n, dtype=np.float32)  # as loaded, still on the host
out = cp.empty(n, dtype=cp.float32)
scale(((n + 255) // 256,), (256,), (samples, out, cp.int32(n)))
cp.cuda.Device().synchronize()
print("out[1] =", float(out[1]))
