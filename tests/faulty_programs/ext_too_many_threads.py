# A C++/CUDA extension built with torch.utils.cpp_extension.load_inline whose launch asks for 2048 threads
# per block (the GPU allows 1024), and whose launcher does not check cudaGetLastError.
import torch
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void add_one_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}

torch::Tensor add_one(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    add_one_kernel<<<(n + 2047) / 2048, 2048>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
cpp_source = "torch::Tensor add_one(torch::Tensor x);"
ext = load_inline(
    "add_one_ext",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_one"],
    extra_cuda_cflags=["-lineinfo"],
)
x = torch.arange(4096, dtype=torch.float32, device="cuda")
y = ext.add_one(x)
torch.cuda.synchronize()
assert torch.equal(y, x + 1), f"add_one gave {y[:4].tolist()}"
print("ok")
