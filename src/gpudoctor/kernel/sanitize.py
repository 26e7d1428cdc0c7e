"""`gpudoctor kernel --sanitize`: on a GPU, the user's kernel and gpudoctor's control kernel run once more each under
compute-sanitizer, memcheck then initcheck, with torch's caching allocator off: an out-of-bounds read that returns a
plausible result is still caught (memcheck), and an output never written is memory nothing wrote when it is copied
back (initcheck). The control, clean under the same instruments, shows what they name is the kernel's. Each run is a
probe run like the others (the supervisor, the time limit, the stop path); its id carries the instrument's name."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from gpudoctor.facts.sanitizer import find_sanitizer
from gpudoctor.instruments.explain import summarise
from gpudoctor.instruments.reruns import ALLOCATORS_OFF_ENV, PRINT_LIMIT, Instrument, SanitizerDetail
from gpudoctor.instruments.sanitizer import parse
from gpudoctor.model import Environment, Outcome, ProbeResult
from gpudoctor.process.cancel import CancelScope
from gpudoctor.protocol import KERNEL_PROBE
from gpudoctor.redact import redact_text
from gpudoctor.stackfacts import SANITIZER_INSTALL_HINT as INSTALL_HINT
from gpudoctor.suite.runner import ProbeInvocation, run_probe, skipped_result
from gpudoctor.textfile import read_prefix

TOOLS = (Instrument.MEMCHECK, Instrument.INITCHECK)
LOG_LIMIT = 256 * 1024  # the sanitizer's log: --print-limit keeps it short; the first errors name the culprit


def _own_files(invocation: ProbeInvocation) -> frozenset[str]:
    """The user's Mojo files' base names (the sanitizer keeps only base names): none for Mojo today, which
    compiles without line info, but the probe's own name marks the launching Python frame."""
    return frozenset({invocation.spec.script})


def instrumented(invocation: ProbeInvocation, tool: Instrument, sanitizer: str, log: Path) -> ProbeInvocation:
    """``invocation`` once under ``tool``: the kernel probe calls each op once on outputs it leaves unfilled."""
    wrapper = (sanitizer, "--tool", tool.value, "--print-limit", str(PRINT_LIMIT), "--log-file", str(log))
    args = invocation.spec.args
    if invocation.spec.id == KERNEL_PROBE:
        args = (*_without_comparison(args), "--instrumented")
    return dataclasses.replace(
        invocation,
        spec=dataclasses.replace(invocation.spec, args=args),
        extra_env={**invocation.extra_env, **ALLOCATORS_OFF_ENV},
        wrapper=wrapper,
        variant=tool.value,
    )


def _without_comparison(args: Sequence[str]) -> list[str]:
    """The kernel probe's arguments without --save/--compare/--cpu-done (an instrumented run judges nothing)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("--save", "--compare", "--cpu-done"):
            skip = True
            continue
        kept.append(arg)
    return kept


def judged(result: ProbeResult, tool: Instrument, log: Path, invocation: ProbeInvocation) -> ProbeResult:
    """``result`` with what the sanitizer's log says: a run the instrument counted errors in fails with them."""
    data = read_prefix(log, LOG_LIMIT) if log.exists() else None
    text = data.decode("utf-8", errors="replace") if data else ""
    report = parse(text)
    found = [redact_text(line) for line in summarise(report, _own_files(invocation))]
    errors = report.error_count if report.error_count is not None else len(report.errors)
    details = {
        **result.details,
        SanitizerDetail.TOOL: tool.value,
        SanitizerDetail.ERRORS: errors,
        SanitizerDetail.FOUND: found,
        SanitizerDetail.CAUGHT: errors > 0,
    }
    if not text:
        summary = f"compute-sanitizer {tool.value} wrote no report: {result.summary}"
        return dataclasses.replace(result, details=details, summary=summary)
    if errors == 0:
        return dataclasses.replace(result, details=details, summary=f"compute-sanitizer {tool.value}: 0 errors")
    summary = f"compute-sanitizer {tool.value}: {errors} error{'s' if errors != 1 else ''}: " + "; ".join(found[:3])
    outcome = result.outcome if result.outcome in (Outcome.CRASH, Outcome.TIMEOUT) else Outcome.FAIL
    return dataclasses.replace(result, outcome=outcome, details=details, summary=summary)


def sanitize(
    invocations: Sequence[ProbeInvocation],
    environment: Environment,
    env: dict[str, str],
    scratch: Path,
    cancel: CancelScope | None,
) -> tuple[ProbeResult, ...]:
    """Each invocation (the kernel's and the control's on one GPU) under each tool, one after the other (the
    sanitizer slows a run tenfold or more; the GPU is not shared between them). Without a GPU or without
    compute-sanitizer, each is a skipped result that says why."""
    planned = [(invocation, tool) for invocation in invocations for tool in TOOLS]
    sites = [Path(p) for p in environment.stack.site_packages or ()]
    sanitizer = find_sanitizer(env, sites)
    if not environment.driver.gpus:
        why = "--sanitize: no GPU here, so no instrument was started (they watch the kernels a GPU runs)"
        return tuple(skipped_result(instrumented(i, t, "compute-sanitizer", scratch), why) for i, t in planned)
    if sanitizer is None:
        why = f"--sanitize: compute-sanitizer not found (CUDA_HOME, PATH, pip's wheel): {INSTALL_HINT}"
        return tuple(skipped_result(instrumented(i, t, "compute-sanitizer", scratch), why) for i, t in planned)
    results = []
    for invocation, tool in planned:
        log = scratch / f"{invocation.spec.id}-{tool.value}.log"
        wrapped = instrumented(invocation, tool, sanitizer.path, log)
        result = run_probe(wrapped, cancel)
        results.append(judged(result, tool, log, wrapped) if result.outcome is not Outcome.INTERRUPTED else result)
        if cancel is not None and cancel.cancelled:
            break
    return tuple(results)
