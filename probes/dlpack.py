"""Probe dlpack: torch tensor -> MAX buffer via from_dlpack -> torch again, values checked.

Run by hand: python probes/dlpack.py --device cuda
Uses max.driver.Buffer (26.x) or the older max.driver.Tensor, whichever exists.
"""

from _harness import run_probe
from _maxsupport import expect_equal, torch_device


def main(ctx):
    ctx.step("import torch")
    import torch

    device = torch_device(ctx)
    ctx.step("import max.driver")
    import max.driver as driver

    buffer_type = getattr(driver, "Buffer", None) or getattr(driver, "Tensor", None)
    ctx.check(buffer_type is not None, "max.driver has neither Buffer nor Tensor")
    ctx.detail("max_buffer_type", "max.driver." + buffer_type.__name__)
    source = torch.arange(12, dtype=torch.float32, device=device).reshape(3, 4)
    ctx.step("%s.from_dlpack(torch tensor on %s)" % (buffer_type.__name__, device))
    buffer = buffer_type.from_dlpack(source)
    ctx.step("torch.from_dlpack(MAX buffer)")
    back = torch.from_dlpack(buffer)
    ctx.check(str(back.device).startswith(device), "round trip moved the tensor to %s" % back.device)
    expect_equal(ctx, back, source, "values after torch -> MAX -> torch")
    ctx.step("write through the MAX view")
    source.add_(1)
    expect_equal(ctx, back, source, "zero-copy view after an in-place update")
    return "torch <-> max.driver.%s round-trips on %s without copying" % (buffer_type.__name__, device)


run_probe("dlpack", main)
