# A cuda.core kernel handed a host address as its float*: the NumPy array's own pointer (x.ctypes.data), where the
# copy to the device was forgotten. On the H100 (2026-11-27) the kernel faults with CUDA_ERROR_ILLEGAL_ADDRESS, which
# surfaces at the next sync; memcheck sees a read ~1.4e14 bytes from the nearest allocation. Before the launch, the
# driver's pointer attributes already know there is no device memory at that address (gpudoctor.calls.launches).
import numpy as np
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

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
x = np.arange(n, dtype=np.float32)  # the samples, still on the host
out = dev.allocate(4 * n, stream=stream)
launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), scale, x.ctypes.data, out, np.int32(n))
stream.sync()
print("scaled", n, "samples")
