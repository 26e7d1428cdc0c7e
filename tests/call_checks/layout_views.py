# Views that are not contiguous row-major storage, passed to a correct custom op (tests/call_checks/ops), and ops.custom
# inside a graph_op given what the op does not declare (issue 50). Run with the checks on in warn mode
# (`PYTHONPATH=$(python -m gpudoctor.calls) GPUDOCTOR_CALL_CHECKS=warn`): each call is checked, warned, and then made,
# so one line says both — {"call", "checked": the check's sentence or null, "max": "returned" or MAX's error}. MAX
# 26.7 on the CPU refuses the three views ("driver buffer's from_dlpack only accepts contiguous tensors"); on CUDA it
# reads them as if contiguous (FACTS, 2026-11-27).
import json
import sys
import warnings
from pathlib import Path

import torch

try:
    from max.torch import CustomOpLibrary, graph_op
except (ModuleNotFoundError, ImportError):  # MAX 26.2 and later moved the bridge
    from max.experimental.torch import CustomOpLibrary, graph_op
from max.graph import ops as graph_ops

OPS = Path(__file__).resolve().parent / "ops"
ops = CustomOpLibrary(OPS)
x = torch.arange(16, dtype=torch.float32).reshape(4, 4)
wide = torch.arange(24, dtype=torch.float32).reshape(4, 6)
row = torch.arange(4, dtype=torch.float32)
out = torch.empty(4, 4)


# one graph function per call: the checks say the first mismatch of each line of the program once
@graph_op(kernel_library=OPS)
def graph_float64(v):
    return graph_ops.custom("plus_one", device=v.device, values=[v], out_types=[v.type])[0]


@graph_op(kernel_library=OPS)
def graph_rank3(v):
    return graph_ops.custom("plus_one", device=v.device, values=[v], out_types=[v.type])[0]


@graph_op(kernel_library=OPS)
def graph_plus_one(v):
    return graph_ops.custom("plus_one", device=v.device, values=[v], out_types=[v.type])[0]


def graph_correct():
    target = torch.empty(4, 4)
    graph_plus_one(target, x)
    assert torch.equal(target, x + 1), target


CALLS = {
    "transposed": lambda: ops.plus_one(out, x.t()),
    "sliced": lambda: ops.plus_one(out, wide[:, 1:5]),
    "expanded": lambda: ops.plus_one(out, row.expand(4, 4)),
    "row-sliced": lambda: ops.plus_one(out, wide.reshape(6, 4)[2:]),  # contiguous at an offset: MAX reads it right
    "graph-float64": lambda: graph_float64(torch.empty(4, 4, dtype=torch.float64), x.double()),
    "graph-rank3": lambda: graph_rank3(torch.empty(4, 4, 1), torch.ones(4, 4, 1)),
    "graph-correct": graph_correct,
}
for name in sys.argv[1:] or list(CALLS):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            CALLS[name]()
        except Exception as error:
            said = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"
        else:
            said = "returned"
    sentences = [str(w.message) for w in caught if w.category.__name__ == "CallMismatchWarning"]
    print(json.dumps({"call": name, "checked": sentences[0] if sentences else None, "max": said}), flush=True)
