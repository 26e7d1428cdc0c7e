# Written for cuda-core 0.x: imports from cuda.core.experimental, which cuda-core 1.x removed (the API is in
# cuda.core now), so the program fails at its imports, before any CUDA call.
import numpy as np
from cuda.core.experimental import Device, LaunchConfig, LegacyPinnedMemoryResource, Program, ProgramOptions, launch

code = r"""
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""
dev = Device()
dev.set_current()
stream = dev.create_stream()
program = Program(code, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
add_one = program.compile("cubin").get_kernel("add_one")

n = 1024
host = LegacyPinnedMemoryResource().allocate(4 * n, stream=stream)
values = np.from_dlpack(host).view(np.float32)
values[:] = 0.0
x = dev.allocate(4 * n, stream=stream)
x.copy_from(host, stream=stream)
launch(stream, LaunchConfig(grid=n // 256, block=256), add_one, x, np.int32(n))
host.copy_from(x, stream=stream)
stream.sync()
print("all ones:", bool((values == 1.0).all()))
