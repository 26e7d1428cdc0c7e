"""Probe cpp-extension: torch.utils.cpp_extension.load_inline builds a tiny op (C++ on the CPU, a CUDA kernel on the
GPU) and runs it, values checked: the way most PyTorch users write their own native ops.

Run by hand: python probes/cpp_extension.py --device cuda
The build goes into this process's temporary folder (kept between runs of the doctor, so a second run loads it).
"""

import os
import tempfile
import time

from _harness import run_probe

CPP = """
#include <torch/extension.h>
torch::Tensor add_one(torch::Tensor x) { return x + 1; }
"""

CUDA_DECLARATION = "torch::Tensor add_one(torch::Tensor x);"

CUDA = """
#include <torch/extension.h>
__global__ void add_one_kernel(const float* in, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}
torch::Tensor add_one(torch::Tensor x) {
  auto out = torch::empty_like(x);
  int64_t n = x.numel();
  add_one_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
  return out;
}
"""


def main(ctx):
    ctx.step("import torch")
    import torch

    ctx.detail("torch", torch.__version__)
    ctx.detail("torch_cuda", torch.version.cuda)
    ctx.step("import torch.utils.cpp_extension")
    from torch.utils import cpp_extension

    folder = os.path.join(tempfile.gettempdir(), "cpp_extension_" + ctx.device)
    if not os.path.isdir(folder):
        os.makedirs(folder)
    started = time.monotonic()
    if ctx.device == "cpu":
        ctx.step("load_inline: build a C++ op")
        module = cpp_extension.load_inline(
            name="gpudoctor_add_one_cpu", cpp_sources=CPP, functions=["add_one"], build_directory=folder,
            verbose=False,
        )
    else:
        ctx.check(torch.version.cuda is not None, "torch %s is a CPU-only build" % torch.__version__)
        ctx.check(torch.cuda.is_available(), "torch.cuda.is_available() is False")
        ctx.detail("cuda_home", cpp_extension.CUDA_HOME)
        ctx.step("load_inline: build a CUDA kernel with nvcc (CUDA_HOME %s)" % cpp_extension.CUDA_HOME)
        module = cpp_extension.load_inline(
            name="gpudoctor_add_one_cuda", cpp_sources=CUDA_DECLARATION, cuda_sources=CUDA, functions=["add_one"],
            build_directory=folder, verbose=False,
        )
    ctx.detail("build_seconds", round(time.monotonic() - started, 2))
    device = "cuda" if ctx.device == "cuda" else "cpu"
    x = torch.arange(1000, dtype=torch.float32, device=device)
    ctx.step("call the built op on %s" % device)
    y = module.add_one(x)
    if device == "cuda":
        torch.cuda.synchronize()
    ctx.check(torch.equal(y.cpu(), x.cpu() + 1), "the built op computed %r for arange + 1" % (y[:4].tolist(),))
    return "torch.utils.cpp_extension builds and runs a %s op on %s" % ("CUDA" if device == "cuda" else "C++", device)


run_probe("cpp-extension", main)
