# A consumer kernel spins on a ready flag in global memory that a producer kernel is meant to set; both are
# launched on the same stream, so the producer waits behind the consumer and nobody ever sets the flag: the
# program never returns from synchronize().
import cupy as cp

module = cp.RawModule(
    code=r"""
extern "C" __global__ void consume(volatile int* ready, const float* x, float* out, int n) {
    while (ready[0] == 0) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
extern "C" __global__ void produce(int* ready) { ready[0] = 1; }
"""
)
consume = module.get_function("consume")
produce = module.get_function("produce")

n = 1024
x = cp.arange(n, dtype=cp.float32)
out = cp.empty_like(x)
ready = cp.zeros(1, dtype=cp.int32)
consume((n // 256,), (256,), (ready, x, out, cp.int32(n)))
produce((1,), (1,), (ready,))
cp.cuda.Device().synchronize()
print("out[1] =", float(out[1]))
