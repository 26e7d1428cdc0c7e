# A numba-cuda kernel that writes one element past its output: the last thread's index is off by one.
import numpy as np
from numba import cuda


@cuda.jit
def shift_right(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i + 1] = x[i]


x = cuda.to_device(np.arange(1024, dtype=np.float32))
out = cuda.device_array(1024, dtype=np.float32)
shift_right[4, 256](x, out)
cuda.synchronize()
print("out[1] =", out.copy_to_host()[1])
