# A tiny CUDA extension built with torch.utils.cpp_extension.load_inline, its flags copied from a build for A100s:
# -gencode=arch=compute_80,code=sm_80 makes SASS for sm_80 only, with no PTX (and a flag naming an arch stops torch
# from adding the GPU's own). On an H100 (sm_90) the launch fails with "no kernel image is available for execution
# on the device"; the launch is not checked, so the error comes out of the next torch call.
import torch
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void add_one_kernel(const float* x, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + 1.0f;
}

torch::Tensor add_one(torch::Tensor x) {
    auto out = torch::empty_like(x);
    int64_t n = x.numel();
    add_one_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(
    name="add_one_ext",
    cpp_sources="torch::Tensor add_one(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["add_one"],
    extra_cuda_cflags=["-gencode=arch=compute_80,code=sm_80"],
)

x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
y = ext.add_one(x)
print("checksum", (y - x).sum().item())
