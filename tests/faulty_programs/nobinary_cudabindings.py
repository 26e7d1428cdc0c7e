# Compiles a kernel with NVRTC (cuda.bindings) to a CUBIN for a fixed --gpu-architecture=sm_80 (the A100 it was
# written for), caches the CUBIN in the temp folder and loads it with cuModuleLoadData: on a GPU of another
# architecture (an H100 is sm_90) the CUBIN holds no code it can run and carries no PTX to JIT:
# CUDA_ERROR_NO_BINARY_FOR_GPU.
import os
import tempfile

import numpy as np
from cuda.bindings import driver, nvrtc

SOURCE = b"""
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


def check(result):
    err, *values = result
    if isinstance(err, nvrtc.nvrtcResult) and err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"NVRTC call failed: {err!r}")
    if isinstance(err, driver.CUresult) and err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {err!r}")
    return values[0] if len(values) == 1 else values


check(driver.cuInit(0))
device = check(driver.cuDeviceGet(0))
context = check(driver.cuDevicePrimaryCtxRetain(device))
check(driver.cuCtxSetCurrent(context))

program = check(nvrtc.nvrtcCreateProgram(SOURCE, b"scale.cu", 0, [], []))
check(nvrtc.nvrtcCompileProgram(program, 1, [b"--gpu-architecture=sm_80"]))
size = check(nvrtc.nvrtcGetCUBINSize(program))
cubin = b" " * size
check(nvrtc.nvrtcGetCUBIN(program, cubin))
with open(os.path.join(tempfile.gettempdir(), "scale_sm80.cubin"), "wb") as cache:
    cache.write(cubin)

image = np.frombuffer(cubin, dtype=np.uint8)
module = check(driver.cuModuleLoadData(image.ctypes.data))
kernel = check(driver.cuModuleGetFunction(module, b"scale"))
n = 1 << 20
x = np.ones(n, dtype=np.float32)
d_x = check(driver.cuMemAlloc(x.nbytes))
check(driver.cuMemcpyHtoD(d_x, x, x.nbytes))
args = (np.array([int(d_x)], dtype=np.uint64), np.array([2.0], dtype=np.float32), np.array([n], dtype=np.int32))
params = np.array([a.ctypes.data for a in args], dtype=np.uint64)
check(driver.cuLaunchKernel(kernel, n // 256, 1, 1, 256, 1, 1, 0, 0, params.ctypes.data, 0))
check(driver.cuMemcpyDtoH(x, d_x, x.nbytes))
print("scaled:", x[:4])
