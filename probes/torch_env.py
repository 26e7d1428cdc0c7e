"""Probe torch-env: which torch this is, whether it sees the device, and one tiny op on it.

Run by hand: python probes/torch_env.py --device cuda
"""

from _harness import run_probe


def _arch_supported(capability, arch_list):
    """Whether torch ships kernels for sm_XY (or PTX it can JIT for it)."""
    sm = "sm_%d%d" % capability
    if sm in arch_list:
        return True
    return any(a.startswith("compute_") and int(a[8:].rstrip("af") or 0) <= capability[0] * 10 + capability[1]
               for a in arch_list)


def main(ctx):
    ctx.step("import torch")
    import torch

    ctx.detail("torch", torch.__version__)
    ctx.detail("torch_cuda", torch.version.cuda)
    ctx.detail("has_float8_e8m0fnu", hasattr(torch, "float8_e8m0fnu"))
    if ctx.device == "cpu":
        ctx.step("tiny CPU op")
        value = (torch.arange(4, dtype=torch.float32) * 2).tolist()
        ctx.check(value == [0.0, 2.0, 4.0, 6.0], "torch computed %r for arange(4) * 2" % (value,))
        return "torch %s computes on the CPU" % torch.__version__

    ctx.check(
        torch.version.cuda is not None,
        "torch %s is a CPU-only build (torch.version.cuda is None); install a CUDA build of torch"
        % torch.__version__,
    )
    ctx.step("torch.cuda.is_available()")
    available = torch.cuda.is_available()
    ctx.detail("cuda_available", available)
    ctx.check(available, "torch.cuda.is_available() is False although the driver reports a GPU")
    ctx.detail("device_count", torch.cuda.device_count())
    ctx.detail("cudnn", torch.backends.cudnn.version())
    arch_list = torch.cuda.get_arch_list()
    ctx.detail("arch_list", arch_list)
    capability = torch.cuda.get_device_capability(0)
    ctx.detail("device_name", torch.cuda.get_device_name(0))
    ctx.detail("device_capability", "%d.%d" % capability)
    ctx.check(
        _arch_supported(capability, arch_list),
        "torch was built for %s, which does not cover this GPU (sm_%d%d)"
        % ((", ".join(arch_list),) + tuple(capability)),
    )
    ctx.step("tiny CUDA op")
    value = (torch.arange(4, dtype=torch.float32, device="cuda") * 2).cpu().tolist()
    torch.cuda.synchronize()
    ctx.check(value == [0.0, 2.0, 4.0, 6.0], "torch computed %r for arange(4) * 2 on CUDA" % (value,))
    return "torch %s (CUDA %s) computes on %s" % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))


run_probe("torch-env", main)
