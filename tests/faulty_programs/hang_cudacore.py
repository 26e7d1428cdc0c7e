# A kernel (cuda.core) spins on a go flag in pinned memory that the host means to set; the host sets it only after
# stream.sync(), which waits for that same kernel: kernel and host wait for each other forever.
import numpy as np
from cuda.core import Device, LaunchConfig, LegacyPinnedMemoryResource, Program, ProgramOptions, launch

code = r"""
extern "C" __global__ void wait_for_host(volatile int* go, float* out) {
    while (go[0] == 0) { }
    out[threadIdx.x] = 1.0f;
}
"""
dev = Device()
dev.set_current()
stream = dev.create_stream()
program = Program(code, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
wait_for_host = program.compile("cubin").get_kernel("wait_for_host")

flag_buffer = LegacyPinnedMemoryResource().allocate(4, stream=stream)
go = np.from_dlpack(flag_buffer).view(np.int32)
go[0] = 0
out = dev.allocate(32 * 4, stream=stream)
launch(stream, LaunchConfig(grid=1, block=32), wait_for_host, flag_buffer, out)
stream.sync()  # waits for the kernel, which waits for the line below
go[0] = 1
print("done")
