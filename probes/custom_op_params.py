"""Probe custom-op-params: a kernel with a defaulted compile-time parameter, called with and without
``op[{...}]`` (seed 002 crashed when the parameter was left to its default).

Run by hand: python probes/custom_op_params.py --device cuda
"""

from _harness import run_probe
from _maxsupport import add_kernel_arguments, expect_equal, import_bridge, load_control_library, torch_device


def main(ctx):
    import torch

    device = torch_device(ctx)
    bridge = import_bridge(ctx)
    library, _ = load_control_library(ctx, bridge)
    x = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3)
    explicit = torch.empty_like(x)
    ctx.step("call scale[{'factor': 3}] on %s" % device)
    library.scale[{"factor": 3}](explicit, x)
    expect_equal(ctx, explicit, x * 3, "scale with factor=3 passed explicitly")
    defaulted = torch.empty_like(x)
    ctx.step("call scale without parameters (default factor=2) on %s" % device)
    library.scale(defaulted, x)
    if device == "cuda":
        torch.cuda.synchronize()
    ctx.detail("default_honoured", bool(torch.equal(defaulted.cpu(), (x * 2).cpu())))
    expect_equal(ctx, defaulted, x * 2, "scale with the parameter left to its default (2)")
    return "defaulted and explicit compile-time parameters both work on %s" % device


def arguments(parser):
    add_kernel_arguments(parser)


run_probe("custom-op-params", main, add_arguments=arguments)
