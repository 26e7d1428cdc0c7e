# The same packed record through cuda.core: float32 samples after a one-byte header, and the kernel is handed the
# buffer's address + 1 as its float*, which is not 4-byte aligned.
import numpy as np
from cuda.core import Device, LaunchConfig, LegacyPinnedMemoryResource, Program, ProgramOptions, launch

code = r"""
extern "C" __global__ void scale(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
"""
dev = Device()
dev.set_current()
stream = dev.create_stream()
program = Program(code, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
scale = program.compile("cubin").get_kernel("scale")

n = 1 << 16
record_host = LegacyPinnedMemoryResource().allocate(1 + 4 * n, stream=stream)  # 1 header byte, then n float32
raw = np.from_dlpack(record_host)
raw[0] = 7
raw[1:] = np.arange(n, dtype=np.float32).view(np.int8)
record = dev.allocate(record_host.size, stream=stream)
record.copy_from(record_host, stream=stream)
out = dev.allocate(4 * n, stream=stream)
samples = int(record.handle) + 1  # skip the header byte
launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), scale, samples, out, np.int32(n))
stream.sync()
print("scaled", n, "samples")
