# Float32 samples stored after a one-byte header in a byte buffer (as read from a packed file): the kernel gets
# the buffer from offset 1 as its float*, an address that is not 4-byte aligned.
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
record = cp.zeros(1 + 4 * n, dtype=cp.uint8)  # 1 header byte, then n float32
record[0] = 7
record[1:] = cp.arange(n, dtype=cp.float32).view(cp.uint8)
samples = record[1:]
out = cp.empty(n, dtype=cp.float32)
scale(((n + 255) // 256,), (256,), (samples, out, cp.int32(n)))
cp.cuda.Device().synchronize()
print("out[1] =", float(out[1]))
