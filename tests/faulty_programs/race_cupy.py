# A block sum in shared memory (CuPy RawKernel, 256 threads per block, 16384 blocks) whose tree steps have no
# __syncthreads(): threads read partial sums their neighbours have not written yet, so the total comes out wrong
# (the program checks it against CuPy's own sum).
import cupy as cp

block_sum = cp.RawKernel(
    r"""
extern "C" __global__ void block_sum(const float* x, float* partial, int n) {
    __shared__ float buf[256];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? x[i] : 0.0f;
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (t < s) buf[t] += buf[t + s];
    }
    if (t == 0) partial[blockIdx.x] = buf[0];
}
""",
    "block_sum",
)

n = 1 << 22
blocks = (n + 255) // 256
x = cp.random.randint(0, 10, n).astype(cp.float32)
partial = cp.zeros(blocks, dtype=cp.float32)
block_sum((blocks,), (256,), (x, partial, cp.int32(n)))
total = float(partial.sum(dtype=cp.float64))
expected = float(x.sum(dtype=cp.float64))
assert total == expected, f"block sums add up to {total}, expected {expected}"
print("sum", total)
