"""Probe cpp-extension: torch.utils.cpp_extension.load builds a tiny op from source files (C++ on the CPU, a CUDA
kernel and its C++ binding on the GPU), loads it and runs it, values checked: the way PyTorch users build native ops.

Run by hand: python probes/cpp_extension.py --device cuda
What users hit is all here: cpp_extension's discovery of CUDA_HOME and nvcc, its CUDA version check, the host
compiler, ninja, the arch list and ABI flags it gives the compilers, the library loaded into torch's dispatcher.
Only the binding includes torch's headers, and only a small part of them (no <torch/extension.h>): the kernel is
plain CUDA, so nvcc never parses torch (78 s on the H100 when it did). The build folder is kept in gpudoctor's
cache under a key of everything that decides what is built (_cppbuild.py), so a second run only loads.
Both variants compile the same binding source, each in its own build: the cuda build compiles it with the flags
of a CUDA build (CUDA's include folder, c10_cuda), where users' builds can fail, and the doctor runs the two
variants at once, so one shared object would make the cuda variant wait for the cpu one and save no time.
"""

import os
import time

from _cppbuild import build_key, locked_build_folder, write_if_changed
from _harness import run_probe

OP_NAMESPACE = "gpudoctor_cpp_extension"

# The binding: torch's C++ API as an extension uses it (a schema parsed from a std::string, so the library links
# against torch's C++ ABI: built with the wrong _GLIBCXX_USE_CXX11_ABI it fails to load with an undefined
# symbol; at::Tensor; the dispatcher), through the few headers that declares instead of <torch/extension.h>,
# which costs 4 times the compile (21 s against 5 s of CPU here).
BINDING = r"""
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>
#ifdef GPUDOCTOR_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
// In add_one_kernel.cu; plain pointers, so the kernel's translation unit needs no torch header.
const char* gpudoctor_add_one_launch(const float* in, float* out, int64_t n, void* stream);
#endif

namespace {

void check_input(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous(), "add_one takes a contiguous float32 tensor");
}

at::Tensor add_one_cpu(const at::Tensor& x) {
  check_input(x);
  at::Tensor out = at::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* result = out.data_ptr<float>();
  for (int64_t i = 0, n = x.numel(); i < n; ++i) result[i] = in[i] + 1.0f;
  return out;
}

#ifdef GPUDOCTOR_WITH_CUDA
at::Tensor add_one_cuda(const at::Tensor& x) {
  check_input(x);
  at::Tensor out = at::empty_like(x);
  void* stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  const char* error = gpudoctor_add_one_launch(x.data_ptr<float>(), out.data_ptr<float>(), x.numel(), stream);
  TORCH_CHECK(error == nullptr, "add_one_kernel launch: ", error);
  return out;
}
#endif

}  // namespace

TORCH_LIBRARY(gpudoctor_cpp_extension, m) { m.def("add_one(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(gpudoctor_cpp_extension, CPU, m) { m.impl("add_one", &add_one_cpu); }
#ifdef GPUDOCTOR_WITH_CUDA
TORCH_LIBRARY_IMPL(gpudoctor_cpp_extension, CUDA, m) { m.impl("add_one", &add_one_cuda); }
#endif
"""

# The kernel: plain CUDA. The standard headers are the ones torch's headers would have brought in: a CUDA
# toolkit older than the host compiler's standard library fails inside them (gcc 11's <functional> with CUDA
# 11.x), and a user's build fails there too; the arch list, -ccbin, host_config.h's compiler check and the CUDA
# version check all apply to this file as to any .cu.
KERNEL = r"""
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>
#include <cuda_runtime.h>

__global__ void add_one_kernel(const float* in, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}

const char* gpudoctor_add_one_launch(const float* in, float* out, int64_t n, void* stream) {
  if (n == 0) return nullptr;
  add_one_kernel<<<(unsigned)((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(in, out, n);
  cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}
"""


def build(ctx, cpp_extension, cuda):
    """Build (or, from the cache, only load) the op library; returns its path."""
    variant = "cuda" if cuda else "cpu"
    key, inputs = build_key(cpp_extension, cuda, __file__)
    ctx.detail("build_key", key)
    ctx.detail("build_inputs", inputs)
    sources = {"add_one.cpp": BINDING}
    if cuda:
        sources["add_one_kernel.cu"] = KERNEL
    ctx.detail("built", sorted(sources))
    name = "gpudoctor_add_one_" + variant
    with locked_build_folder(variant, key) as folder:
        ctx.detail("build_directory", folder)
        paths = [write_if_changed(os.path.join(folder, file), text) for file, text in sorted(sources.items())]
        library = os.path.join(folder, name + ".so")
        before = _modified(library)
        compilers = "the host compiler and nvcc (CUDA_HOME %s)" % cpp_extension.CUDA_HOME if cuda else "the host compiler"
        ctx.step("cpp_extension.load: build %s with %s" % (" and ".join(sorted(sources)), compilers))
        started = time.monotonic()
        path = cpp_extension.load(
            name=name, sources=paths, build_directory=folder, is_python_module=False, verbose=False,
            extra_cflags=["-DGPUDOCTOR_WITH_CUDA"] if cuda else [],
        )
        ctx.detail("build_seconds", round(time.monotonic() - started, 2))
        # ninja decides what to rebuild; the cache served the run only when it left the library as it was.
        ctx.detail("cache_hit", before is not None and before == _modified(library))
    return path or library


def _modified(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def main(ctx):
    ctx.step("import torch")
    import torch

    ctx.detail("torch", torch.__version__)
    ctx.detail("torch_cuda", torch.version.cuda)
    ctx.step("import torch.utils.cpp_extension")
    from torch.utils import cpp_extension

    cuda = ctx.device == "cuda"
    if cuda:
        ctx.check(torch.version.cuda is not None, "torch %s is a CPU-only build" % torch.__version__)
        ctx.check(torch.cuda.is_available(), "torch.cuda.is_available() is False")
        ctx.detail("cuda_home", cpp_extension.CUDA_HOME)
    build(ctx, cpp_extension, cuda)
    op = getattr(getattr(torch.ops, OP_NAMESPACE), "add_one")
    x = torch.arange(1000, dtype=torch.float32, device=ctx.device)
    ctx.step("call the built op on %s" % ctx.device)
    y = op(x)
    if cuda:
        torch.cuda.synchronize()
    ctx.check(torch.equal(y.cpu(), x.cpu() + 1), "the built op computed %r for arange + 1" % (y[:4].tolist(),))
    return "torch.utils.cpp_extension builds and runs a %s op on %s" % ("CUDA" if cuda else "C++", ctx.device)


run_probe("cpp-extension", main)
