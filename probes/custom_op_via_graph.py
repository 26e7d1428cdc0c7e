"""Probe custom-op-via-graph: the control kernel through graph_op(kernel_library=...) and ops.custom.

Run by hand: python probes/custom_op_via_graph.py --device cuda
"""

from pathlib import Path

from _harness import run_probe
from _maxsupport import add_kernel_arguments, control_kernel, expect_equal, import_bridge, require_api, torch_device


def main(ctx):
    import torch

    device = torch_device(ctx)
    bridge = import_bridge(ctx)
    graph_op = require_api(ctx, bridge, "graph_op")
    # A MAX no kernel generation supports is a clean skip here, before the graph is defined.
    kernel_path = control_kernel(ctx, bridge)
    from max.graph import ops

    ctx.step("define graph_op with kernel_library")

    @graph_op(kernel_library=Path(kernel_path))
    def gpudoctor_custom_add_one(x):
        return ops.custom("add_one", device=x.device, values=[x], out_types=[x.type])[0]

    x = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3)
    out = torch.empty_like(x)
    ctx.step("call ops.custom('add_one') through graph_op on %s" % device)
    gpudoctor_custom_add_one(out, x)
    expect_equal(ctx, out, x + 1, "ops.custom add_one via graph_op")
    return "ops.custom('add_one') inside graph_op passes on %s" % device


def arguments(parser):
    add_kernel_arguments(parser)


run_probe("custom-op-via-graph", main, add_arguments=arguments)
