"""Probe layout-contract: what this MAX does with a tensor that is not contiguous row-major storage, and whose
buffer a custom op's output is.

Run by hand: python probes/layout_contract.py --device cuda
A custom op (the control kernel's add_one) and a graph_op (x + 2) are each given a transposed input, a sliced input
(every row cut short: strides (6, 1)), a row slice (contiguous, at a storage offset) and a transposed output; each
result is compared with torch's. Per case, this MAX either refuses (the error is kept), gives the right result (it
copies, or honours the strides), or reads (or writes) wrong (the values are kept): the last is a silent wrong result,
a bug of the stack, and fails the probe. Then an op that writes nothing (kernels/<generation>/unwritten) shows whose buffer an output is: the
caller's (it keeps what it held) or one MAX allocates and copies back (zeroed, or holding what the memory held).
Each case runs on its own: one refusal never hides the next case. Compatible with Python 3.8, like the harness.
"""

from _harness import run_probe
from _maxsupport import add_kernel_arguments, import_bridge, load_control_library, require_api, torch_device

REFUSES = "refuses"
RIGHT = "right"
READS_WRONG = "reads wrong"
WRITES_WRONG = "writes wrong"
FAULTS = "faults"  # the GPU faulted on the call (a misaligned or illegal access): the context is lost after it
NOT_RUN = "not run"
WRONG = (READS_WRONG, WRITES_WRONG, FAULTS)
_FAULT_WORDS = ("misaligned address", "illegal memory access", "unspecified launch failure", "illegal instruction")


def _views(torch, device):
    """(name, what the case passes, input, output, expected) for each layout case; the output written in place."""
    square = torch.arange(16, dtype=torch.float32, device=device).reshape(4, 4) * 8 + 1
    wide = torch.arange(24, dtype=torch.float32, device=device).reshape(4, 6) * 8 + 1
    tall = torch.arange(20, dtype=torch.float32, device=device).reshape(5, 4) * 8 + 1
    return (
        ("transposed input", "input", square.t()),
        ("sliced input", "input", wide[:, 1:5]),
        ("row-sliced input", "input", tall[1:]),
        ("transposed output", "output", square),
    )


def _layout(tensor):
    return "%s strides %s offset %d%s" % (
        list(tensor.shape),
        tuple(tensor.stride()),
        tensor.storage_offset(),
        "" if tensor.is_contiguous() else " (not contiguous)",
    )


def _try_case(ctx, torch, call, name, role, view, added):
    """One case: the call, its result against torch's, as a dict."""
    if role == "input":
        source, target = view, torch.full((4, 4), -1.0, device=view.device)
    else:  # a transposed output: the op's element [i, j] lands at [j, i] of the storage
        source, target = view, torch.full((4, 4), -1.0, device=view.device).t()
    case = {"passes": "%s %s" % (role, _layout(source if role == "input" else target))}
    written, expected = target, source + added
    ctx.step("%s: %s" % (name, case["passes"]))
    try:
        call(target, source)
        if written.is_cuda:
            torch.cuda.synchronize()
    except Exception as error:  # what this MAX says of the layout is the finding
        text = str(error).strip().splitlines()[0][:300] if str(error) else ""
        case["does"] = FAULTS if any(w in str(error) for w in _FAULT_WORDS) else REFUSES
        case["error"] = "%s: %s" % (type(error).__name__, text)
        return case
    got, want = written.detach().cpu(), expected.detach().cpu()
    if bool(torch.equal(got, want)):
        case["does"] = RIGHT
    else:
        case["does"] = READS_WRONG if role == "input" else WRITES_WRONG
        case["got"] = got.flatten()[:8].tolist()
        case["expected"] = want.flatten()[:8].tolist()
    return case


def _output_buffer(ctx, torch, library, device):
    """Whose buffer the op's output is, from an op that writes nothing, called twice with two markers."""
    x = torch.ones(4, 4, device=device)
    kept = []
    held = []
    for marker in (float("nan"), -7.0):
        out = torch.full((4, 4), marker, device=device)
        ctx.step("call write_nothing with its output at %r on %s" % (marker, device))
        library.write_nothing(out, x)
        got = out.detach().cpu()
        kept.append(bool(torch.isnan(got).all()) if marker != marker else bool((got == marker).all()))
        held.append(got)
    if all(kept):
        return "caller", "the caller's: an output the op never writes keeps what it held"
    if all(bool((h == 0).all()) for h in held):
        return "max-zeroed", "MAX's own, zeroed, copied back into the caller's tensor (a never-written output reads 0)"
    sample = [v for v in held[0].flatten()[:4].tolist()]
    return "max-uninitialised", (
        "MAX's own, copied back into the caller's tensor, holding what its memory held (e.g. %s): a never-written "
        "output reads leftovers" % sample
    )


def _said(cases, op):
    """What one op did, grouped: "custom op refuses transposed input, sliced input; right: row-sliced input"."""
    by_outcome = {}
    for name, case in cases.items():
        if name.startswith(op + ", "):
            by_outcome.setdefault(case["does"], []).append(name[len(op) + 2 :])
    return "%s %s" % (op, ", ".join("%s %s" % (does, " + ".join(names)) for does, names in sorted(by_outcome.items())))


def main(ctx):
    import torch

    device = torch_device(ctx)
    bridge = import_bridge(ctx)
    require_api(ctx, bridge, "CustomOpLibrary")
    library, _ = load_control_library(ctx, bridge)
    cases = {}
    faulted = []  # a GPU fault is sticky: after it, no later call on this context says anything

    def run_cases(op, call, added):
        for name, role, view in _views(torch, device) if not faulted else ():
            case = _try_case(ctx, torch, call, name, role, view, added)
            cases[op + ", " + name] = case
            if case["does"] == FAULTS:
                faulted.append(op + ", " + name)
                return

    run_cases("custom op", library.add_one, 1)
    graph_op = getattr(bridge, "graph_op", None)
    if graph_op is not None and not faulted:
        ctx.step("define graph_op")

        @graph_op
        def gpudoctor_layout_add_two(x):
            return x + 2

        run_cases("graph_op", gpudoctor_layout_add_two, 2)
    if faulted:
        ctx.detail("faulted_at", faulted[0])
        ctx.detail("not_run", "the cases after %s: the GPU context is lost after a fault" % faulted[0])
    ctx.detail("cases", cases)
    owner = None
    try:
        if faulted:
            raise RuntimeError("the GPU context was lost to the fault at %s" % faulted[0])
        layout_library, _ = load_control_library(ctx, bridge, "unwritten")
        owner, said = _output_buffer(ctx, torch, layout_library, device)
        ctx.detail("output_buffer", owner)
        ctx.detail("output_buffer_said", said)
    except Exception as error:  # the layout cases stand without it
        ctx.detail("output_buffer", "unknown")
        ctx.detail("output_buffer_said", "not found (%s: %s)" % (type(error).__name__, error))
    wrong = sorted(name for name, case in cases.items() if case["does"] in WRONG)
    ctx.detail("reads_wrong", bool(wrong))
    ctx.detail("wrong_cases", wrong)
    said = "; ".join(_said(cases, op) for op in ("custom op", "graph_op") if any(n.startswith(op) for n in cases))
    ctx.check(
        not faulted,
        "MAX on %s faults on the GPU for %s (%s); the cases after it were not run"
        % (device, faulted[0] if faulted else "", cases[faulted[0]]["error"] if faulted else ""),
    )
    ctx.check(
        not wrong,
        "MAX on %s computes a wrong result, without an error, for %s (%s)"
        % (
            device,
            ", ".join(wrong),
            "; ".join("%s: got %s, expected %s" % (n, cases[n]["got"], cases[n]["expected"]) for n in wrong),
        ),
    )
    owned = "" if owner is None else "; outputs are %s" % owner
    if graph_op is None:
        said += " (no graph_op in this MAX)"
    return "layout on %s — %s%s" % (device, said, owned)


def arguments(parser):
    add_kernel_arguments(parser)


run_probe("layout-contract", main, add_arguments=arguments)
