"""Report predicates over the call checks of `gpudoctor run` (gpudoctor.calls: each custom-op call and cuda.core launch
checked inside the program before it proceeds): the mismatches, a launch given host memory, every call matching when
the program still failed in MAX, and what could not be checked. Pure functions of the command's run detail."""

from __future__ import annotations

from typing import Any

from gpudoctor.knowledge.checks.launch_arguments import is_launch
from gpudoctor.knowledge.registry import PredicateEvidence, predicate
from gpudoctor.model import Device, Outcome, ProbeResult, Report
from gpudoctor.protocol import REPRODUCER_RUN_ID as RUN_ID
from gpudoctor.protocol import ReproducerDetail

# Where a failure is MAX's: its Python files in the frames, its words for a model it could not build or run.
_MAX_FILES = ("/max/", "\\max\\")
_MAX_WORDS = ("Failed to compile the model", "max.engine", "_Model_execute", "Please file an issue")
HOST_POINTER = "host-pointer"  # gpudoctor.calls.check.Kind.HOST_POINTER: a launch's, not a custom op's


def _call_checks(report: Report) -> tuple[ProbeResult, dict[str, Any]] | None:
    result = report.result(RUN_ID)
    checks = result.details.get(ReproducerDetail.CALL_CHECKS) if result is not None else None
    return (result, checks) if result is not None and isinstance(checks, dict) else None


def _lines(checks: dict[str, Any], key: str) -> list[Any]:
    value = checks.get(key)
    return value if isinstance(value, list) else []


@predicate("reproducer_call_mismatch")
def reproducer_call_mismatch(report: Report) -> list[PredicateEvidence]:
    """The first call of each line of the program that does not match its op's declaration, in the checks' words;
    and gpudoctor's own known-good runs that passed beside the command on the GPU (the stack runs custom ops)."""
    found = _call_checks(report)
    if found is None:
        return []
    result, checks = found
    mismatches = [m for m in _mismatches(checks) if m.get("kind") != HOST_POINTER and not is_launch(m)]
    if not mismatches:
        return []
    # the call the program failed or crashed at first: its frames name that line
    failed_at = {f"{frame.file}:{frame.line}" for frame in result.frames}
    mismatches.sort(key=lambda m: not any(_same_line(line, str(m.get("site"))) for line in failed_at))
    evidence: list[PredicateEvidence] = [(str(m["sentence"]), result.id) for m in mismatches]
    if result.outcome.is_problem:
        controls = [r for r in report.results if r.id != RUN_ID and r.device is Device.CUDA]
        evidence += [(f"{r.id} passes on this GPU and stack: {r.summary}", r.id) for r in controls
                     if r.outcome is Outcome.PASS]  # fmt: skip
    return evidence


def _mismatches(checks: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in _lines(checks, "mismatches") if isinstance(m, dict) and m.get("sentence")]


@predicate("reproducer_launch_host_pointer")
def reproducer_launch_host_pointer(report: Report) -> list[PredicateEvidence]:
    """A kernel launch (cuda.core) given host memory where the kernel reads device memory, named before the launch."""
    found = _call_checks(report)
    if found is None:
        return []
    result, checks = found
    return [(str(m["sentence"]), result.id) for m in _mismatches(checks) if m.get("kind") == HOST_POINTER]


def _same_line(frame: str, site: str) -> bool:
    """A frame's ``file:line`` and a call site (relative to the program's folder, or as the frame has it)."""
    return frame == site or frame.endswith("/" + site)


def _failed_in_max(result: ProbeResult) -> bool:
    """A crash that no Python frame places outside MAX (MAX's crashes on a GPU often print none), or a failure whose
    frames or words are MAX's."""
    in_max = any(any(mark in frame.file for mark in _MAX_FILES) for frame in result.frames)
    if result.outcome is Outcome.CRASH:
        return in_max or not result.frames
    text = " ".join(filter(None, (result.summary, result.message, result.stderr_tail[-4000:])))
    return result.outcome is Outcome.FAIL and (in_max or any(word in text for word in _MAX_WORDS))


@predicate("reproducer_calls_matched")
def reproducer_calls_matched(report: Report) -> list[PredicateEvidence]:
    """Every custom-op call the program made matched its op's declaration, and the program then failed or crashed in
    MAX: the arguments are not the cause."""
    found = _call_checks(report)
    if found is None:
        return []
    result, checks = found
    checked = [str(line) for line in _lines(checks, "checked")]
    if not checked or _lines(checks, "mismatches") or not _failed_in_max(result):
        return []
    ended = f"crashed ({result.signal})" if result.outcome is Outcome.CRASH else f"failed: {result.summary[:200]}"
    sites = f"{len(checked)} call site(s) checked, each matching its op's declaration: {', '.join(checked[:8])}"
    return [(sites, result.id), (f"then the program {ended}", result.id)]


@predicate("reproducer_calls_unchecked")
def reproducer_calls_unchecked(report: Report) -> list[PredicateEvidence]:
    """What the checks could not check (a library without source, an argument that is not a tensor), once each."""
    found = _call_checks(report)
    if found is None:
        return []
    result, checks = found
    return [(str(line), result.id) for line in _lines(checks, "unchecked")]
