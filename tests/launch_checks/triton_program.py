"""A model moved to cuda:1 and the batch left on cuda:0, launched through the Triton stand-in (standins/triton)."""

import triton


class OnGpu:
    def __init__(self, device):
        self.device = device

    def data_ptr(self):
        return 1 << 40


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK=1024):
    pass


weights, batch, out = OnGpu("cuda:1"), OnGpu("cuda:0"), OnGpu("cuda:0")
add_kernel[(1,)](batch, weights, out, 4, BLOCK=1024)
