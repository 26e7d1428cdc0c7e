# Copies a host array to the GPU through cuda.bindings' driver API but passes the array's length where the source
# pointer goes: the driver reads from host address 16 and the process dies of SIGSEGV inside libcuda, host side.
import numpy as np
from cuda.bindings import driver


def check(result):
    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {err!r}")
    return values[0] if values else None


check(driver.cuInit(0))
device = check(driver.cuDeviceGet(0))
context = check(driver.cuDevicePrimaryCtxRetain(device))
check(driver.cuCtxSetCurrent(context))

x = np.arange(16, dtype=np.float32)
d_x = check(driver.cuMemAlloc(x.nbytes))
check(driver.cuMemcpyHtoD(d_x, len(x), x.nbytes))  # meant cuMemcpyHtoD(d_x, x, x.nbytes)
y = np.empty_like(x)
check(driver.cuMemcpyDtoH(y, d_x, x.nbytes))
print("round trip ok:", np.array_equal(x, y))
