"""Probe max-import: MAX's PyTorch bridge imports (max.torch, or max.experimental.torch since 26.7).

Run by hand: python probes/max_import.py
Recognises the bridge failing on a torch without torch.float8_e8m0fnu (seed 000 used torch 2.6).
"""

from _harness import run_probe
from _maxsupport import import_bridge, max_version


def main(ctx):
    ctx.step("import torch")
    import torch

    ctx.detail("torch", torch.__version__)
    ctx.detail("max", max_version())
    ctx.detail("torch_has_float8_e8m0fnu", hasattr(torch, "float8_e8m0fnu"))
    bridge = import_bridge(ctx)
    ctx.check(hasattr(bridge, "CustomOpLibrary"), "%s has no CustomOpLibrary" % bridge.__name__)
    ctx.check(hasattr(bridge, "graph_op"), "%s has no graph_op" % bridge.__name__)
    return "%s imports (MAX %s, torch %s)" % (bridge.__name__, max_version(), torch.__version__)


run_probe("max-import", main, devices=())
