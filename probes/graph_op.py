"""Probe graph-op: a trivial MAX graph as a PyTorch op (graph_op) writing into a preallocated output.

Run by hand: python probes/graph_op.py --device cuda
"""

from _harness import run_probe
from _maxsupport import expect_equal, import_bridge, require_api, torch_device


def main(ctx):
    import torch

    device = torch_device(ctx)
    bridge = import_bridge(ctx)
    graph_op = require_api(ctx, bridge, "graph_op")
    ctx.step("define graph_op")

    @graph_op
    def gpudoctor_add_two(x):
        return x + 2

    x = torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3)
    out = torch.empty_like(x)
    ctx.step("call graph_op (compiles the graph) on %s" % device)
    gpudoctor_add_two(out, x)
    expect_equal(ctx, out, x + 2, "graph_op x + 2")
    return "graph_op ran on %s and wrote the preallocated output" % device


run_probe("graph-op", main)
