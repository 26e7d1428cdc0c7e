# Brightens a 2.2 GB stack of 8-bit frames in place (CuPy RawKernel). The kernel computes its index as a 32-bit int,
# `int i = blockIdx.x * blockDim.x + threadIdx.x`: past 2^31 elements the product wraps to a negative number, which
# still passes the bound check against the 64-bit n, and the thread reads ~2 GiB before the array: an illegal memory
# access (cudaErrorIllegalAddress at the next synchronisation).
import cupy as cp

brighten = cp.RawKernel(
    r"""
extern "C" __global__ void brighten(unsigned char* frames, long long n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = frames[i] * 2;
        frames[i] = v > 255 ? 255 : v;
    }
}
""",
    "brighten",
)

n = 2_200_000_000  # 1100 frames of 2000 x 1000 pixels
frames = cp.full(n, 100, dtype=cp.uint8)
threads = 256
brighten(((n + threads - 1) // threads,), (threads,), (frames, cp.int64(n)))
cp.cuda.Device().synchronize()
print("brightened", n, "pixels; last pixel", int(frames[-1]))
