# Divides every value by its block's sum (CuPy RawKernel, 256 threads per block): the tree reduction and its
# __syncthreads() sit inside `if (threadIdx.x < 128)`, so the upper half of the block never reaches those barriers.
# Its one __syncthreads() after the branch is matched by the lower half's first barrier in the loop, and the upper
# half reads buf[0] while the sum is still being built: its values come out divided by a partial sum (or, where the
# barriers never complete, the kernel hangs). The program's assert on the normalised values is what ends it.
import cupy as cp

normalize = cp.RawKernel(
    r"""
extern "C" __global__ void block_normalize(const float* x, float* out, int n) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    float v = i < n ? x[i] : 0.0f;
    buf[t] = v;
    __syncthreads();
    if (t < 128) {  // only half the block takes part in the reduction
        for (int s = 128; s > 0; s /= 2) {
            if (t < s) buf[t] += buf[t + s];
            __syncthreads();
        }
    }
    __syncthreads();
    if (i < n) out[i] = v / buf[0];
}
""",
    "block_normalize",
)

n = 1 << 18
blocks = (n + 255) // 256
x = cp.random.randint(1, 10, n).astype(cp.float32)
out = cp.empty_like(x)
normalize((blocks,), (256,), (x, out, cp.int32(n)))
expected = x / x.reshape(blocks, 256).sum(axis=1).repeat(256)
bad = int((cp.abs(out - expected) > 1e-6).sum())
assert bad == 0, f"{bad} of {n} normalised values are wrong (first block: {out[:4]} vs {expected[:4]})"
print("normalised", n, "values")
