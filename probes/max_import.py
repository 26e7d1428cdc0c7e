"""Probe max-import: MAX's PyTorch bridge imports (max.torch, or max.experimental.torch since 26.7).

Run by hand: python probes/max_import.py
Recognises the bridge failing on a torch without torch.float8_e8m0fnu (seed 000 used torch 2.6), and
records which of the bridge's APIs this release has (graph_op is absent before MAX 25.5).
"""

from _harness import run_probe
from _maxsupport import import_bridge, max_version

BRIDGE_API = ("CustomOpLibrary", "graph_op")


def main(ctx):
    ctx.step("import torch")
    import torch

    ctx.detail("torch", torch.__version__)
    ctx.detail("max", max_version())
    ctx.detail("torch_has_float8_e8m0fnu", hasattr(torch, "float8_e8m0fnu"))
    bridge = import_bridge(ctx)
    # Which of the bridge's APIs this release has: CustomOpLibrary arrived in 25.4, graph_op in 25.5. An
    # absent API is not a broken stack; the probes that need it skip themselves, saying so.
    api = [name for name in BRIDGE_API if hasattr(bridge, name)]
    ctx.detail("bridge_api", api)
    missing = [name for name in BRIDGE_API if name not in api]
    suffix = "; no %s in this release" % ", ".join(missing) if missing else ""
    return "%s imports (MAX %s, torch %s)%s" % (bridge.__name__, max_version(), torch.__version__, suffix)


run_probe("max-import", main, devices=())
