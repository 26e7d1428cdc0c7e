# A CuPy RawKernel saxpy without a bounds check, launched on whole blocks of 256 threads for an array
# whose length is not a multiple of 256.
import cupy as cp

saxpy = cp.RawKernel(
    r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = a * x[i] + y[i];
}
""",
    "saxpy",
)

n = 1_000_003
x = cp.arange(n, dtype=cp.float32)
y = cp.ones(n, dtype=cp.float32)
blocks = (n + 255) // 256 + 4096
saxpy((blocks,), (256,), (cp.float32(2.0), x, y))
cp.cuda.Device().synchronize()
print("y[-1] =", float(y[-1]))
