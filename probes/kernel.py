"""Probe kernel: a user's Mojo custom-op package through CustomOpLibrary, called as the spec says.

Run by hand (gpudoctor kernel PATH writes these commands into its report):
    python probes/kernel.py --device cpu --package PATH --calls '[{"op": "add_one", ...}]' --save cpu.pt
    python probes/kernel.py --device cuda --package PATH --calls '[...]' --compare cpu.pt
Without --calls it only compiles the package and checks which ops register.
"""

import json
import os
import time

from _harness import CheckFailed, run_probe
from _outputs import MARKERS, fill_value, gather, judge
from _maxsupport import (
    compile_diagnostics,
    first_compiler_error,
    import_bridge,
    is_compile_error,
    require_api,
    torch_device,
)

MAX_DIAGNOSTICS = 20
_TOLERANCES = {  # dtype -> (rtol, atol) for the CPU-vs-GPU comparison
    "float64": (1e-10, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}


class CompileFailed(CheckFailed):
    """The Mojo compiler rejected the package."""


def make_tensor(torch, spec, index, values, device):
    dtype = getattr(torch, spec["dtype"])
    shape = tuple(spec["shape"])
    count = 1
    for size in shape:
        count *= size
    if values == "ones":
        tensor = torch.ones(shape, dtype=dtype)
    elif values == "random":
        generator = torch.Generator().manual_seed(1234 + index)
        if dtype.is_floating_point:
            tensor = torch.randn(shape, generator=generator).to(dtype)
        elif dtype == torch.bool:
            tensor = torch.rand(shape, generator=generator) > 0.5
        else:
            low = 0 if dtype == torch.uint8 else -8
            tensor = torch.randint(low, 16, shape, generator=generator).to(dtype)
    else:  # arange: small values, exact in every dtype, different for each input
        base = (torch.arange(count) + 3 * index) % 17
        if dtype.is_floating_point:
            tensor = (base.to(torch.float64) / 4 - 2).to(dtype)
        elif dtype == torch.bool:
            tensor = base % 2 == 1
        else:
            tensor = base.to(dtype)
        tensor = tensor.reshape(shape)
    return tensor.to(device)


def describe(call):
    parameters = call.get("parameters") or {}
    suffix = "[%s]" % ", ".join("%s=%r" % item for item in sorted(parameters.items())) if parameters else ""
    return call["op"] + suffix


def _tolerance(call, index):
    rtol, atol = _TOLERANCES.get(call["outputs"][index]["dtype"], (1e-4, 1e-5))
    rtol = call.get("rtol") if call.get("rtol") is not None else rtol
    atol = call.get("atol") if call.get("atol") is not None else atol
    return rtol, atol


def relation(torch, actual, expected, rtol=1e-4, atol=1e-5):
    """How ``actual`` relates to ``expected`` when they differ, read from the numbers: ("multiple", k) when every
    element is k times the expected one, ("offset", c) when every element is shifted by c, ("small", r) when the
    largest relative difference r is within 100x the tolerance, else None."""
    a, e = actual.to(torch.float64).flatten(), expected.to(torch.float64).flatten()
    finite = torch.isfinite(a) & torch.isfinite(e)
    if not bool(finite.any()):
        return None
    a, e = a[finite], e[finite]
    scale = torch.maximum(e.abs(), torch.full_like(e, atol))
    worst = float(((a - e).abs() / scale).max())
    if worst <= 100 * max(rtol, 1e-6):  # rounding-sized, whatever its shape
        return "small", worst
    nonzero = e != 0
    if bool(nonzero.any()) and bool((a[~nonzero] == 0).all()):
        ratios = a[nonzero] / e[nonzero]
        k = float(ratios[0])
        if abs(k - 1) > 1e-6 and bool(torch.isclose(ratios, torch.full_like(ratios, k), rtol=1e-6, atol=0).all()):
            return "multiple", k
    shift = a - e
    c = float(shift[0])
    if c != 0 and bool(torch.isclose(shift, torch.full_like(shift, c), rtol=1e-6, atol=atol).all()):
        return "offset", c
    return None


RELATION_SENTENCES = {
    "multiple": "every element is exactly %g times the expected one",
    "offset": "every element is the expected one plus %g",
    "small": "the largest relative difference is only %.3g: within reach of the dtype's rounding",
    "stale": "it equals the output of the previous call (%s): a result left over from before",
}


def difference(torch, call, index, actual, expected, previous=None):
    """None when ``actual`` matches ``expected`` within the dtype's tolerance, else (sentence, kind): how not, and
    what the numbers show — a multiple, an offset, the previous call's output (``previous``), or a small
    difference (kind None when none of these)."""
    if tuple(actual.shape) != tuple(expected.shape):
        return "shape %s, expected %s" % (list(actual.shape), list(expected.shape)), None
    rtol, atol = _tolerance(call, index)
    if actual.dtype.is_floating_point:
        a, e = actual.to(torch.float64), expected.to(torch.float64)
        close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        tolerance = "rtol=%g, atol=%g" % (rtol, atol)
    else:
        a, e = actual, expected.to(actual.dtype)
        close = a == e
        tolerance = "exact"
    if bool(close.all()):
        return None
    bad = (~close).nonzero()
    first = tuple(int(i) for i in bad[0])
    diff = (a.to(torch.float64) - e.to(torch.float64)).abs()
    diff = torch.where(close, torch.zeros_like(diff), diff)
    sentence = "%d of %d elements beyond %s; max abs diff %g; first at index %s: %r vs %r" % (
        bad.shape[0],
        actual.numel(),
        tolerance,
        float(diff.nan_to_num(float("inf")).max()),
        first,
        a[first].item(),
        e[first].item(),
    )
    if previous is not None and previous[1].shape == actual.shape and bool(torch.equal(previous[1], actual)):
        return "%s; %s" % (sentence, RELATION_SENTENCES["stale"] % previous[0]), "stale"
    found = relation(torch, actual, expected, rtol, atol)
    if found is None:
        return sentence, None
    kind, value = found
    if kind == "small" and not actual.dtype.is_floating_point:
        return sentence, None
    return "%s; %s" % (sentence, RELATION_SENTENCES[kind] % value), kind


def output_label(call, index, tensor):
    """``add_one output 0 (float32[4, 4])``: how a message names one output of a call."""
    return "%s output %d (%s%s)" % (describe(call), index, call["outputs"][index]["dtype"], list(tensor.shape))


def reference_outputs(ctx, torch, call, cpu_inputs):
    """The user's expected outputs for this call, computed on the CPU (``cpu_inputs``: the call's inputs there),
    or None when the call gives no reference."""
    reference = call.get("reference")
    if not reference:
        return None
    parameters = dict(call.get("parameters") or {})
    try:
        if reference.get("function"):
            import importlib.util

            spec = importlib.util.spec_from_file_location("gpudoctor_reference", reference["file"])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            value = getattr(module, reference["function"])(*cpu_inputs, **parameters)
        else:
            names = {"torch": torch, "inputs": cpu_inputs, "parameters": parameters}
            names.update(("x%d" % i, t) for i, t in enumerate(cpu_inputs))
            value = eval(reference["expression"], names)  # the user's own expression, from their spec
    except Exception as error:
        ctx.detail("reference_error", "%s: %s" % (type(error).__name__, error))
        raise CheckFailed("the reference for %s raised %s: %s" % (describe(call), type(error).__name__, error))
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) != len(call["outputs"]) or not all(isinstance(v, torch.Tensor) for v in values):
        ctx.detail("reference_error", "returned %d value(s) for %d output(s)" % (len(values), len(call["outputs"])))
        raise CheckFailed(
            "the reference for %s must give one tensor per output (%d), got %r"
            % (describe(call), len(call["outputs"]), type(value).__name__)
        )
    return [v.detach().to("cpu") for v in values]


def check_against(ctx, torch, call, outputs, expected, against, previous=None):
    """Fail on the first output that differs from ``expected`` (the reference or the CPU's result); ``previous``:
    (label, outputs) of the call before, to recognise its result left over."""
    for index, (actual, wanted) in enumerate(zip(outputs, expected)):
        before = None
        if previous is not None and index < len(previous[1]):
            before = (previous[0], previous[1][index])
        found = difference(torch, call, index, actual, wanted, before)
        if found is None:
            continue
        problem, kind = found
        if kind is not None:
            ctx.detail("mismatch", kind)
        what = output_label(call, index, actual)
        if against == "reference":
            ctx.detail("differs_from_reference", True)
            raise CheckFailed("%s on %s differs from your reference: %s" % (what, ctx.device, problem))
        ctx.detail("differs_from_cpu", True)
        raise CheckFailed(
            "%s on %s differs from the CPU's result: %s (%s first, cpu second). Both results look plausible "
            "(written, not all zeros), so nothing here says which side is wrong: give a reference to judge each"
            % (what, ctx.device, problem, ctx.device)
        )


def call_op(ctx, torch, op, call, inputs, device, start, before=None, note=""):
    """Call ``op`` once on outputs that start as ``start``: "marker" or "marker2" (the dtype's first or second
    marker, _outputs.fill_value), "zeros", or "before" (a copy of ``before``, an earlier result): its outputs, on
    the CPU."""
    outputs = []
    for index, spec in enumerate(call["outputs"]):
        dtype = getattr(torch, spec["dtype"])
        tensor = torch.empty(tuple(spec["shape"]), dtype=dtype, device=device)
        if start == "before":
            tensor.copy_(before[index].to(device))
        elif start in MARKERS:
            tensor.fill_(fill_value(torch, dtype, MARKERS[start]))
        else:
            tensor.zero_()
        outputs.append(tensor)
    label = {"marker": "", "marker2": " again (outputs holding another marker)", "zeros": " again (outputs zeroed)",
             "before": " again (outputs holding its result)"}[start]
    ctx.step("call %s%s on %s%s" % (describe(call), note, device, label))
    op(*outputs, *inputs)
    if device == "cuda":
        ctx.step("synchronize after %s on cuda" % describe(call))
        torch.cuda.synchronize()
    return [t.detach().to("cpu") for t in outputs]


def wait_for_cpu(ctx, marker):
    """Wait until the CPU run has ended (the doctor creates ``marker`` then, whatever its outcome).

    Only while the marker's folder exists: by hand, after the doctor has gone, there is nothing to wait for.
    """
    if not marker:
        return
    ctx.step("wait for the CPU run to end")
    while os.path.isdir(os.path.dirname(marker)) and not os.path.exists(marker):
        time.sleep(0.1)


def instrumented_calls(ctx, torch, library, calls, device):
    """Each call once, on outputs left as allocated (not filled), for an instrument watching the process
    (`gpudoctor kernel --sanitize`): with the caching allocator off, an output the kernel never writes is memory
    nothing wrote when it is copied back, which initcheck names; memcheck names accesses out of bounds."""
    for call in calls:
        inputs = [make_tensor(torch, spec, i, call.get("values", "arange"), device) for i, spec in enumerate(call["inputs"])]
        op = getattr(library, call["op"])
        if call.get("parameters"):
            op = op[call["parameters"]]
        outputs = [torch.empty(tuple(o["shape"]), dtype=getattr(torch, o["dtype"]), device=device) for o in call["outputs"]]
        ctx.step("call %s on %s under the instrument" % (describe(call), device))
        op(*outputs, *inputs)
        if device == "cuda":
            ctx.step("synchronize after %s on cuda" % describe(call))
            torch.cuda.synchronize()
        ctx.step("copy the outputs of %s back" % describe(call))
        [t.detach().to("cpu") for t in outputs]
    ctx.detail("results_checked", "none")
    return "%s called once each on %s for the instrument (its results are the instrument's to judge)" % (
        ", ".join(describe(c) for c in calls), device)


def main(ctx):
    import torch
    from pathlib import Path

    options = ctx.options
    device = torch_device(ctx)
    bridge = import_bridge(ctx)
    custom_op_library = require_api(ctx, bridge, "CustomOpLibrary")
    package = Path(options.package)
    ctx.step("compile %s with CustomOpLibrary" % package.name)
    try:
        library = custom_op_library(package)
    except Exception as error:
        if not is_compile_error(error):
            raise
        diagnostics = compile_diagnostics(error) or [first_compiler_error(error)]
        ctx.detail("compile_errors", diagnostics[:MAX_DIAGNOSTICS])
        raise CompileFailed(
            "the Mojo compiler rejected %s (%d error%s): %s"
            % (package.name, len(diagnostics), "" if len(diagnostics) == 1 else "s", " | ".join(diagnostics[:5]))
        )
    registered = {}
    for name in options.ops or []:
        try:
            getattr(library, name)
            registered[name] = "ok"
        except Exception as error:
            registered[name] = "%s: %s" % (type(error).__name__, error)
    ctx.detail("ops", registered)
    calls = json.loads(options.calls) if options.calls else []
    if not calls:
        found = ", ".join(sorted(registered)) or "none listed"
        return "%s compiles on %s; ops: %s (no calls given)" % (package.name, device, found)

    if options.instrumented:
        return instrumented_calls(ctx, torch, library, calls, device)
    results, suspect, checked = [], None, []
    for call_index, call in enumerate(calls):
        inputs = [make_tensor(torch, spec, i, call.get("values", "arange"), device) for i, spec in enumerate(call["inputs"])]
        op = getattr(library, call["op"])
        if call.get("parameters"):
            op = op[call["parameters"]]
        outputs = call_op(ctx, torch, op, call, inputs, device, "marker")
        results.append(outputs)
        cpu_inputs = [t.detach().to("cpu") for t in inputs]

        def again(these, start, before, op=op, call=call, inputs=inputs):
            note = "" if these is inputs else " with other input values"
            return call_op(ctx, torch, op, call, these, device, start, before, note)

        evidence = gather(torch, again, inputs, outputs)
        inputs_nonzero = any(bool((t != 0).any()) for t in cpu_inputs)
        label = lambda index, tensor, call=call: output_label(call, index, tensor)  # noqa: E731
        found = judge(torch, evidence, label, bool(call.get("reference")), device, inputs_nonzero)
        if found is not None:
            ctx.detail(found.detail, True)
            if found.fatal:
                raise CheckFailed(found.sentence)
            if suspect is None:
                suspect = (found.detail, found.sentence)
        expected = reference_outputs(ctx, torch, call, cpu_inputs)
        if expected is not None:
            ctx.step("check %s against the reference" % describe(call))
            previous = (describe(calls[call_index - 1]), results[call_index - 1]) if call_index else None
            check_against(ctx, torch, call, outputs, expected, "reference", previous)
            checked.append("reference")
    if options.save:
        # Saved before this run's own verdict, with that verdict: a GPU run compares with it only if it looks right.
        ctx.step("save the results to %s" % os.path.basename(options.save))
        os.makedirs(os.path.dirname(os.path.abspath(options.save)), exist_ok=True)
        partial = options.save + ".partial"
        torch.save({"results": results, "suspect": suspect[1] if suspect else None}, partial)
        os.replace(partial, options.save)
    if suspect is not None:
        raise CheckFailed(suspect[1])
    compared, cpu_suspect = False, None
    unchecked = [i for i, c in enumerate(calls) if not c.get("reference")]
    if options.compare and unchecked:
        wait_for_cpu(ctx, options.cpu_done)
        if os.path.exists(options.compare):
            saved = torch.load(options.compare)
            cpu_suspect = saved.get("suspect")
            if cpu_suspect:
                ctx.detail("cpu_result_suspect", cpu_suspect)
            else:
                ctx.step("compare with the CPU results")
                for call_index in unchecked:
                    check_against(ctx, torch, calls[call_index], results[call_index], saved["results"][call_index], "cpu")
                compared = True
        else:
            ctx.detail("compare_missing", os.path.basename(options.compare))
    ctx.detail("compared_with_cpu", compared)
    what = ", ".join(describe(c) for c in calls)
    if compared:
        verdict = "results match the CPU's" + (" and your reference" if checked else "")
    elif not unchecked:
        verdict = "results match your reference"
    else:
        why = "the CPU's result looks wrong, so it is no reference: %s" % cpu_suspect if cpu_suspect else "no reference"
        verdict = "ran; results not checked (%s; outputs were written and are not all zeros)" % why
    ctx.detail("results_checked", "cpu" if compared else ("reference" if checked else "none"))
    return "%s on %s: %s" % (what, device, verdict)


def arguments(parser):
    parser.add_argument("--package", required=True, help="the Mojo package directory (with __init__.mojo)")
    parser.add_argument("--ops", nargs="*", help="op names to look up in the library")
    parser.add_argument(
        "--calls", help="JSON list of calls: op, outputs, inputs, parameters, values, rtol, atol, reference"
    )
    parser.add_argument("--save", help="write the outputs here (torch.save) for a later --compare")
    parser.add_argument("--compare", help="compare the outputs with those saved by a CPU run")
    parser.add_argument("--cpu-done", help="a file the doctor creates when the CPU run ends (wait for it)")
    parser.add_argument(
        "--instrumented", action="store_true", help="call each op once, outputs not filled: an instrument judges"
    )


run_probe("kernel", main, add_arguments=arguments)
