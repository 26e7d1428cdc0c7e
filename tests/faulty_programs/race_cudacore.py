# The same block sum through cuda.core (C++ compiled by NVRTC, launched with cuda.core.launch): no __syncthreads()
# between the tree steps in shared memory, so threads read partial sums not yet written and the total is wrong.
import numpy as np
from cuda.core import Device, LaunchConfig, LegacyPinnedMemoryResource, Program, ProgramOptions, launch

code = r"""
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
"""
dev = Device()
dev.set_current()
stream = dev.create_stream()
program = Program(code, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
block_sum = program.compile("cubin").get_kernel("block_sum")

n = 1 << 22
blocks = n // 256
pinned = LegacyPinnedMemoryResource()
x_host = pinned.allocate(4 * n, stream=stream)
values = np.random.default_rng(0).integers(0, 10, n).astype(np.float32)
np.from_dlpack(x_host).view(np.float32)[:] = values
x = dev.allocate(4 * n, stream=stream)
x.copy_from(x_host, stream=stream)
partial = dev.allocate(4 * blocks, stream=stream)
launch(stream, LaunchConfig(grid=blocks, block=256), block_sum, x, partial, np.int32(n))
partial_host = pinned.allocate(4 * blocks, stream=stream)
partial_host.copy_from(partial, stream=stream)
stream.sync()
total = float(np.from_dlpack(partial_host).view(np.float32).sum(dtype=np.float64))
expected = float(values.sum(dtype=np.float64))
assert total == expected, f"block sums add up to {total}, expected {expected}"
print("sum", total)
