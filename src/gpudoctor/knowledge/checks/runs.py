"""Report predicates on a user's failing command (`gpudoctor run`, issue 44): what its class's experiments found on the
failing path only (a kernel's error, an API error the failure itself reports), a host crash told from a GPU fault by a
clean memcheck, a program that never used CUDA, a hang examined at its deadline (the GPU's running kernels, or where
the host threads wait). Pure functions of a Report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gpudoctor.instruments.explain import _NO_BINARY_ERRORS, overflow_in_line
from gpudoctor.knowledge.registry import PredicateEvidence, predicate
from gpudoctor.model import Outcome, ProbeResult, Report
from gpudoctor.protocol import LOG_RUN_ID, ReproducerDetail
from gpudoctor.protocol import REPRODUCER_RUN_ID as RUN_ID

# --- `gpudoctor run`: what the class's experiments found, on the failing path only (issue 44) ----------------------
# Kinds of cause (instruments.explain.cause_kind) that have their own entry, with its own fix; the rest are the
# general "the instruments name where your program goes wrong".
_OWN_ENTRY_KINDS = frozenset({"race", "uninitialized", "misaligned", "host-address", "launch-refused", "sync",
                              "index-overflow", "stream-race", "sticky", "no-binary"})  # fmt: skip
# Calls that read back an error an earlier call already made (CUDA's errors are sticky): the same error seen there is
# that earlier failure's echo, not a cause of its own.
_READ_BACK = re.compile(
    r"the CUDA call (?:cudaGetLastError|cudaPeekAtLastError|cudaDeviceSynchronize|"
    r"cudaStreamSynchronize|cuCtxSynchronize|cuStreamSynchronize) failed"
)


def _failure_words(result: ProbeResult) -> str:
    from gpudoctor.instruments.triage import failing_words

    return failing_words(result).lower()


def _named_by_failure(cause: dict[str, object], words: str) -> bool:
    """An API error is evidence only where the failure itself reports it (its name or its words): the calls a
    library makes and handles at start-up (cuda.core's cuCtxGetDevice before a context exists) are not."""
    return any(isinstance(w, str) and w and w.lower() in words for w in (cause.get("api_error"),
                                                                        cause.get("api_error_text")))  # fmt: skip


def located_causes(report: Report) -> list[tuple[str, str]]:
    """(kind, evidence line) of what the instruments found on the failing path of the user's command: a kernel's
    error, an API error the failure names, the synchronous rerun's line where it differs from the command's own."""
    result = report.result(RUN_ID)
    if result is None:
        return _pasted_records(report)
    words = _failure_words(result)
    found: list[tuple[str, str]] = []
    for said in result.details.get(ReproducerDetail.INSTRUMENTS) or ():
        if not isinstance(said, dict):
            continue
        if said.get("instrument") == "synchronous":
            if said.get("raised_at") and not said.get("raised_at_as_before"):
                found.append(("raised", f"run synchronously (CUDA_LAUNCH_BLOCKING=1) it raises at {said['raised_at']}"))
            continue
        tool = said.get("instrument")
        causes = said.get("causes")
        if not isinstance(causes, list):  # recorded before causes had kinds: every line, as it was then
            found += [("legacy", f"compute-sanitizer {tool}: {line}") for line in said.get("found") or ()]
            continue
        last: str | None = None
        errors_seen: set[object] = set()
        for cause in causes:
            kind = str(cause.get("kind"))
            if kind == "out-of-bounds" and overflow_in_line(str(cause.get("line"))) is not None:
                kind = "index-overflow"  # recorded before the kind existed: read from the line's figures
            if kind in ("api-error", "launch-refused") and cause.get("api_error") in _NO_BINARY_ERRORS:
                kind = "no-binary"
            if kind in ("api-error", "launch-refused", "no-binary"):
                if cause.get("api_error") in errors_seen and _READ_BACK.search(str(cause.get("line"))):
                    kind = "sticky"  # read back at a later call: the earlier failure's, said as its consequence
                errors_seen.add(cause.get("api_error"))
            if kind == "count":
                if last is not None:
                    found.append((last, f"compute-sanitizer {tool}: {cause.get('line')}"))
                continue
            if kind in ("api-error", "launch-refused", "sticky", "no-binary") and not _named_by_failure(cause, words):
                last = None
                continue
            said_by = "" if tool == "torch-stream-sanitizer" else f"compute-sanitizer {tool}: "  # says its own name
            found.append((kind, f"{said_by}{cause.get('line')}"))
            last = kind
    return found


# compute-sanitizer's own record lines ("========= Invalid __global__ read ..."), not any banner of equals signs
_SANITIZER_RECORD = re.compile(
    r"^=+ +(?:COMPUTE-SANITIZER|Invalid __|Uninitialized __|Race reported|Barrier error|"
    r"Program hit|Error: )",
    re.M,
)


def _pasted_records(report: Report) -> list[tuple[str, str]]:
    """compute-sanitizer's own records pasted into a log (`gpudoctor explain`), read as a run's instruments are: each
    distinct cause with its kind, in the user's words."""
    log = report.result(LOG_RUN_ID)
    if log is None or not _SANITIZER_RECORD.search(log.stderr_tail or ""):
        return []
    from gpudoctor.instruments.explain import causes
    from gpudoctor.instruments.sanitizer import parse

    records = parse(log.stderr_tail or "")
    if not records.errors:
        return []
    return [(str(c["kind"]), f"compute-sanitizer's records in the log: {c['line']}") for c in causes(records)]


def of_kinds(report: Report, kinds: frozenset[str] | None) -> list[PredicateEvidence]:
    wanted = [(k, line) for k, line in located_causes(report) if (k in kinds if kinds else k not in _OWN_ENTRY_KINDS)]
    run = RUN_ID if report.result(RUN_ID) is not None else LOG_RUN_ID
    return [(line, run) for _, line in wanted]


@predicate("reproducer_race_located")
def reproducer_race_located(report: Report) -> list[PredicateEvidence]:
    return of_kinds(report, frozenset({"race"}))


@predicate("reproducer_uninitialized_located")
def reproducer_uninitialized_located(report: Report) -> list[PredicateEvidence]:
    return of_kinds(report, frozenset({"uninitialized"}))


@predicate("reproducer_misaligned_located")
def reproducer_misaligned_located(report: Report) -> list[PredicateEvidence]:
    return of_kinds(report, frozenset({"misaligned"}))


@predicate("reproducer_host_address_located")
def reproducer_host_address_located(report: Report) -> list[PredicateEvidence]:
    return of_kinds(report, frozenset({"host-address"}))


@predicate("reproducer_launch_refused_located")
def reproducer_launch_refused_located(report: Report) -> list[PredicateEvidence]:
    return of_kinds(report, frozenset({"launch-refused"}))


def synchronous_rerun(result: ProbeResult) -> dict[str, Any] | None:
    return next((s for s in result.details.get(ReproducerDetail.INSTRUMENTS) or ()
                 if isinstance(s, dict) and s.get("instrument") == "synchronous"), None)  # fmt: skip


def right_when_synchronous(result: ProbeResult) -> bool:
    said = synchronous_rerun(result)
    return said is not None and said.get("exit_code") == 0 and not said.get("timed_out")


def _sanitizer_runs(result: ProbeResult) -> list[dict[str, object]]:
    return [s for s in result.details.get(ReproducerDetail.INSTRUMENTS) or ()
            if isinstance(s, dict) and s.get("instrument") != "synchronous"]  # fmt: skip


def _clean(said: dict[str, object]) -> bool:
    return said.get("errors") == 0 and not said.get("never_used_cuda") and not said.get("timed_out")


@predicate("reproducer_instruments_clean")
def reproducer_instruments_clean(report: Report) -> list[PredicateEvidence]:
    """A wrong result (or another failure the instruments were run for) where every compute-sanitizer tool ran to
    its end and found nothing: the kernels they watched neither race, nor read memory nothing wrote, nor access out
    of bounds. Not for a host crash (its own entry)."""
    result = report.result(RUN_ID)
    if result is None or result.details.get(ReproducerDetail.FAILURE_CLASS) not in ("wrong-result", "other"):
        return []
    runs = _sanitizer_runs(result)
    if not runs or not all(_clean(s) for s in runs) or located_causes(report):
        return []
    if right_when_synchronous(result):
        return []  # found: the result is right when launches wait (its own entry)
    return [(f"{_tool_name(s)}: 0 errors ({s.get('seconds')} s)", RUN_ID) for s in runs]


def _tool_name(said: dict[str, object]) -> str:
    tool = str(said.get("instrument"))
    return "torch's CUDA stream sanitizer" if tool == "torch-stream-sanitizer" else f"compute-sanitizer {tool}"


@predicate("reproducer_host_crashed")
def reproducer_host_crashed(report: Report) -> list[PredicateEvidence]:
    """A fatal signal where memcheck, run over the same program, saw no error on the GPU: the host side crashed.
    Evidence: the signal, memcheck clean, and the innermost native and Python frames where they were taken."""
    result = report.result(RUN_ID)
    if result is None or result.details.get(ReproducerDetail.FAILURE_CLASS) != "host-crash":
        return []
    memcheck = [s for s in _sanitizer_runs(result) if s.get("instrument") == "memcheck"]
    if not memcheck or not all(_clean(s) for s in memcheck):
        return []
    lines = [f"the process died of {result.signal}",
             f"compute-sanitizer memcheck over the same program: 0 errors on the GPU (exit status "
             f"{memcheck[0].get('exit_code')}, {memcheck[0].get('seconds')} s)"]  # fmt: skip
    if result.native is not None and result.native.frames:
        top = [f for f in result.native.frames if f.thread == "crashing thread"][:4] or list(result.native.frames[:4])
        lines.append("native frames (" + (result.native.how or "") + "): " +
                     " < ".join(f"{f.function}" + (f" ({f.where.rsplit('/', 1)[-1]})" if f.where else "")
                                for f in top))  # fmt: skip
    python = [f for f in result.frames if f.thread in ("current", None)][:1] or list(result.frames[:1])
    lines += [f"Python was at {f.file.rsplit('/', 1)[-1]}:{f.line} in {f.function}" for f in python]
    return [(line, RUN_ID) for line in lines]


@predicate("reproducer_never_used_cuda")
def reproducer_never_used_cuda(report: Report) -> list[PredicateEvidence]:
    """compute-sanitizer said the program ended before its first CUDA call: nothing on the GPU was examined."""
    result = report.result(RUN_ID)
    if result is None or not any(s.get("never_used_cuda") for s in _sanitizer_runs(result)):
        return []
    tools = ", ".join(str(s.get("instrument")) for s in _sanitizer_runs(result) if s.get("never_used_cuda"))
    return [(f"compute-sanitizer ({tools}): the program terminated before its first instrumented CUDA call", RUN_ID)]


def _deadline(result: ProbeResult) -> dict[str, object]:
    seen = result.details.get(ReproducerDetail.AT_DEADLINE)
    return seen if isinstance(seen, dict) else {}


def _nvml_lines(seen: dict[str, object]) -> list[str]:
    nvml = seen.get("nvml")
    gpus = nvml.get("gpus") if isinstance(nvml, dict) else None
    lines = []
    for gpu in gpus if isinstance(gpus, list) else ():
        held = gpu.get("program_memory_mib")
        lines.append(f"NVML at the deadline: GPU {gpu.get('gpu')} {gpu.get('utilisation_percent')} % busy"
                     + (f", the program holding {held} MiB on it" if held is not None else ""))  # fmt: skip
    return lines


def _waits_at(result: ProbeResult) -> list[str]:
    """Where the main thread was at the deadline: its innermost frame, and the innermost line of the user's own
    files (those the command names) below it."""
    import shlex

    current = [f for f in result.frames if f.thread == "current"] or list(result.frames)
    if not current:
        return []
    try:
        own = {Path(a).name for a in shlex.split(result.command or "") if a.endswith(".py")}
    except ValueError:
        own = set()
    inner = current[0]
    lines = [f"the main thread waits in {Path(inner.file).name}:{inner.line} ({inner.function})"]
    mine = next((f for f in current if Path(f.file).name in own), None)
    if mine is not None and mine is not inner:
        lines.append(f"called from your {Path(mine.file).name}:{mine.line} ({mine.function})")
    return lines


@predicate("reproducer_hangs_in_kernel")
def reproducer_hangs_in_kernel(report: Report) -> list[PredicateEvidence]:
    """A hang examined at its deadline with a kernel running on the GPU (cuda-gdb attached): which kernel, its
    grid, where its threads are, and NVML's view."""
    result = report.result(RUN_ID)
    if result is None or result.outcome is not Outcome.TIMEOUT:
        return []
    seen = _deadline(result)
    kernels = [k for k in seen.get("kernels") or () if isinstance(k, dict)]  # type: ignore[attr-defined]
    if not kernels:
        return []
    lines = [f"{seen.get('debugger')} attached at the deadline: kernel `{k.get('kernel')}` grid {k.get('grid')} "
             f"block {k.get('block')} {str(k.get('status')).lower()}" for k in kernels]  # fmt: skip
    threads = [t for t in seen.get("threads") or () if isinstance(t, dict)]  # type: ignore[attr-defined]
    lines += [f"{t.get('count')} threads of blocks {t.get('blocks')} at {t.get('pc')} ({t.get('source')})"
              for t in threads[:4]]  # fmt: skip
    lines += _nvml_lines(seen)
    lines += _waits_at(result)
    return [(line, RUN_ID) for line in lines]


@predicate("reproducer_hangs_on_host")
def reproducer_hangs_on_host(report: Report) -> list[PredicateEvidence]:
    """A hang with no kernel seen running (no cuda-gdb, no GPU, or none running): where each thread was."""
    result = report.result(RUN_ID)
    if result is None or result.outcome is not Outcome.TIMEOUT or reproducer_hangs_in_kernel(report):
        return []
    seen = _deadline(result)
    lines = []
    if seen.get("debugger") and not seen.get("kernels"):
        family = result.details.get(ReproducerDetail.PROCESSES)
        several = isinstance(family, dict) and len(family.get("processes") or ()) > 1
        lines.append(f"{seen.get('debugger')} attached at the deadline: no kernel running"
                     + (" in the command's own process (its other processes were not attached)" if several
                        else " on the GPU"))  # fmt: skip
    lines += _waits_at(result)
    if result.native is not None and result.native.frames:
        first = result.native.frames[0]
        lines.append(f"native ({first.thread}): #{first.number} {first.function}")
    lines += _nvml_lines(seen)
    if not lines:
        lines.append(f"no end after {result.duration_s:.0f} s; no thread's frames were taken")
    return [(line, RUN_ID) for line in lines]
