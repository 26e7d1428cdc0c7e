# A CuPy RawKernel launched asking for more dynamic shared memory per block than the GPU allows.
import cupy as cp

k = cp.RawKernel(
    r"""
extern "C" __global__ void reduce(const float* x, float* out, int n) {
    extern __shared__ float buf[];
    int i = threadIdx.x;
    buf[i] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i == 0) { float s = 0; for (int j = 0; j < blockDim.x; ++j) s += buf[j]; out[0] = s; }
}
""",
    "reduce",
)
x = cp.ones(256, dtype=cp.float32)
out = cp.zeros(1, dtype=cp.float32)
k((1,), (256,), (x, out, cp.int32(256)), shared_mem=512 * 1024)
cp.cuda.Device().synchronize()
print("sum", float(out[0]))
