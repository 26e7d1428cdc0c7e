"""Probe custom-op: CustomOpLibrary with the control kernel, eagerly and under torch.compile.

Run by hand: python probes/custom_op.py --device cuda (both; the doctor runs the two halves as separate runs,
side by side: `custom-op` with --no-compile, `custom-op-compiled` with --compiled-only)
The control kernel is correct for CPU and GPU; if it crashes, the stack is at fault, not a kernel.
Like the other control probes, it loads a cached compiled copy of the control package (see
_maxsupport.compiled_package); CustomOpLibrary handed the source folder, as users do, is custom-op-source,
once for all devices (the build does not depend on the device).
"""

from _harness import run_probe
from _maxsupport import add_kernel_arguments, expect_equal, import_bridge, load_control_library, torch_device


def main(ctx):
    import torch

    device = torch_device(ctx)
    bridge = import_bridge(ctx)
    library, _ = load_control_library(ctx, bridge)
    x = torch.arange(12, dtype=torch.float32, device=device).reshape(3, 4)
    if not ctx.options.compiled_only:
        out = torch.empty_like(x)
        ctx.step("call add_one eagerly on %s" % device)
        library.add_one(out, x)
        expect_equal(ctx, out, x + 1, "add_one, eager")
        if ctx.options.no_compile:
            return "add_one passes eagerly on %s (torch.compile not tried)" % device

    def add_one(inp):
        result = torch.empty_like(inp)
        library.add_one(result, inp)
        return result

    ctx.step("call add_one under torch.compile on %s" % device)
    compiled = torch.compile(add_one)(x)
    expect_equal(ctx, compiled, x + 1, "add_one under torch.compile")
    if ctx.options.compiled_only:
        return "add_one passes under torch.compile on %s" % device
    return "add_one passes on %s, eagerly and under torch.compile" % device


def arguments(parser):
    add_kernel_arguments(parser)
    halves = parser.add_mutually_exclusive_group()
    halves.add_argument("--no-compile", action="store_true", help="only the eager call")
    halves.add_argument("--compiled-only", action="store_true", help="only the call under torch.compile")


run_probe("custom-op", main, add_arguments=arguments)
