# The GPU work is right (a kernel compiled and launched through cuda.core, result checked); the program then fails
# in plain Python, looking up a config key it never set (KeyError). cuda.core's Device() makes a driver call that
# fails with CUDA_ERROR_INVALID_CONTEXT before set_current(); the library handles it, and it is no part of the
# failure.
import numpy as np
from cuda.core import Device, LaunchConfig, LegacyPinnedMemoryResource, Program, ProgramOptions, launch

config = {"n": 4096, "scale": 3.0, "out_dir": "results"}
code = r"""
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""
dev = Device()
dev.set_current()
stream = dev.create_stream()
program = Program(code, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
scale = program.compile("cubin").get_kernel("scale")

n = config["n"]
host = LegacyPinnedMemoryResource().allocate(4 * n, stream=stream)
values = np.from_dlpack(host).view(np.float32)
values[:] = np.arange(n, dtype=np.float32)
x = dev.allocate(4 * n, stream=stream)
x.copy_from(host, stream=stream)
launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), scale, x, np.float32(config["scale"]), np.int32(n))
host.copy_from(x, stream=stream)
stream.sync()
assert np.array_equal(values, 3.0 * np.arange(n, dtype=np.float32))
print(f"scaled {n} values, writing them to {config['output_dir']}")
