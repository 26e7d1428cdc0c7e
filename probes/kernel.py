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


def compare(ctx, torch, call_index, call, outputs, reference):
    """Each output against the CPU's; the first difference beyond tolerance fails the probe."""
    for index, (actual, expected) in enumerate(zip(outputs, reference)):
        what = "%s output %d (%s%s)" % (describe(call), index, call["outputs"][index]["dtype"], list(actual.shape))
        if actual.shape != expected.shape:
            ctx.detail("differs_from_cpu", True)
            raise CheckFailed("%s: shape %s on %s, %s on the CPU" % (what, list(actual.shape), ctx.device, list(expected.shape)))
        if actual.dtype.is_floating_point:
            rtol, atol = _TOLERANCES.get(call["outputs"][index]["dtype"], (1e-4, 1e-5))
            rtol = call.get("rtol") if call.get("rtol") is not None else rtol
            atol = call.get("atol") if call.get("atol") is not None else atol
            a, e = actual.to(torch.float64), expected.to(torch.float64)
            close = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
            tolerance = "rtol=%g, atol=%g" % (rtol, atol)
        else:
            a, e = actual, expected
            close = actual == expected
            tolerance = "exact"
        if bool(close.all()):
            continue
        bad = (~close).nonzero()
        first = tuple(int(i) for i in bad[0])
        diff = (a.to(torch.float64) - e.to(torch.float64)).abs()
        diff = torch.where(close, torch.zeros_like(diff), diff)
        ctx.detail("differs_from_cpu", True)
        raise CheckFailed(
            "%s differs from the CPU result: %d of %d elements beyond %s; max abs diff %g; first at index %s: "
            "%s %r vs cpu %r"
            % (
                what,
                bad.shape[0],
                actual.numel(),
                tolerance,
                float(diff.nan_to_num(float("inf")).max()),
                first,
                ctx.device,
                actual[first].item(),
                expected[first].item(),
            )
        )


def wait_for_cpu(ctx, marker):
    """Wait until the CPU run has ended (the doctor creates ``marker`` then, whatever its outcome).

    Only while the marker's folder exists: by hand, after the doctor has gone, there is nothing to wait for.
    """
    if not marker:
        return
    ctx.step("wait for the CPU run to end")
    while os.path.isdir(os.path.dirname(marker)) and not os.path.exists(marker):
        time.sleep(0.1)


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

    results = []
    for call_index, call in enumerate(calls):
        inputs = [make_tensor(torch, spec, i, call.get("values", "arange"), device) for i, spec in enumerate(call["inputs"])]
        outputs = [torch.empty(tuple(s["shape"]), dtype=getattr(torch, s["dtype"]), device=device) for s in call["outputs"]]
        ctx.step("call %s on %s" % (describe(call), device))
        op = getattr(library, call["op"])
        if call.get("parameters"):
            op = op[call["parameters"]]
        op(*outputs, *inputs)
        if device == "cuda":
            ctx.step("synchronize after %s on cuda" % describe(call))
            torch.cuda.synchronize()
        outputs = [t.detach().to("cpu") for t in outputs]
        results.append(outputs)
    if options.save:
        ctx.step("save the results to %s" % os.path.basename(options.save))
        os.makedirs(os.path.dirname(os.path.abspath(options.save)), exist_ok=True)
        partial = options.save + ".partial"
        torch.save(results, partial)
        os.replace(partial, options.save)
    compared = False
    if options.compare:
        wait_for_cpu(ctx, options.cpu_done)
        if os.path.exists(options.compare):
            ctx.step("compare with the CPU results")
            reference = torch.load(options.compare)
            for call_index, call in enumerate(calls):
                compare(ctx, torch, call_index, call, results[call_index], reference[call_index])
            compared = True
        else:
            ctx.detail("compare_missing", os.path.basename(options.compare))
    ctx.detail("compared_with_cpu", compared)
    what = ", ".join(describe(c) for c in calls)
    return "%s ran on %s%s" % (what, device, " and matches the CPU" if compared else "")


def arguments(parser):
    parser.add_argument("--package", required=True, help="the Mojo package directory (with __init__.mojo)")
    parser.add_argument("--ops", nargs="*", help="op names to look up in the library")
    parser.add_argument("--calls", help="JSON list of calls: op, outputs, inputs, parameters, values, rtol, atol")
    parser.add_argument("--save", help="write the outputs here (torch.save) for a later --compare")
    parser.add_argument("--compare", help="compare the outputs with those saved by a CPU run")
    parser.add_argument("--cpu-done", help="a file the doctor creates when the CPU run ends (wait for it)")


run_probe("kernel", main, add_arguments=arguments)
