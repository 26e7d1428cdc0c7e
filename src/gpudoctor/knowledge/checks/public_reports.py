"""Report predicates for what public reports already found (knowledge.public, issue 51): the threads of the same
error as a failing run's, with the cause each found — an answer where two threads or more found one cause, else
candidates beside the text's own reading. Pure functions of a Report (the corpus is loaded once per process).
"""

from __future__ import annotations

import functools

from gpudoctor.knowledge.registry import PredicateEvidence, predicate
from gpudoctor.model import Report


def _public_reports(report: Report) -> tuple[list[PredicateEvidence], bool]:
    """The public reports (knowledge.public) whose error is the same as the failing run's, closest first, each with
    what caused it and what fixed it, as evidence; and whether the threads shown found one cause (two or more whose
    causes are alike) — an answer — or each its own (candidates: the error alone does not say which is yours)."""
    result = report.own_result()
    if result is None or not result.outcome.is_problem:
        return [], False
    from gpudoctor.knowledge.public import error_lines

    # the summary is a line of the output, stripped of what says it is a traceback's code line: read the output
    # itself where there is one (`raise CudaAPIError(retcode, msg)` is where it raised, not what)
    said_by_run = (result.stderr_tail or result.summary, result.exception_type or "", result.message or "")
    lines = error_lines("\n".join(said_by_run))
    if not lines:
        return [], False
    said, agreed = _read(tuple(lines))
    return [(line, result.id) for line in said], agreed


@functools.lru_cache(maxsize=16)
def _read(lines: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    """What the public reports say of these error lines, and whether they found one cause: read once per process,
    though both predicates below ask."""
    from gpudoctor.knowledge.public import COMMON, SAME_CAUSE, SHOWN, load_corpus, said

    corpus = load_corpus()
    nearest = corpus.nearest(lines)
    if len(nearest) > COMMON:
        return (), False  # as common as that, its causes are many: naming one would mislead
    answered = [found for _, found in nearest if found.established]
    if not answered or (len(nearest) >= 3 and len(answered) < 2):
        return (), False  # the same error, and nobody (or one thread of many) found why: no answer to give
    shown = answered[:SHOWN]
    agreeing = [found for found in shown[1:] if corpus.same_cause(shown[0], found) >= SAME_CAUSE]
    plural = "s" if len(nearest) > 1 else ""
    head = f"the same error in {len(nearest)} public report{plural}; {len(answered)} found the cause"
    if agreeing:
        head += f" (closest first; {len(agreeing) + 1} of them the same cause)"
    elif len(shown) > 1:  # an error many causes end in: the candidates, not an answer
        head += ", each a different one: the error alone does not say which is yours (closest first)"
    else:
        head += ": one thread's cause, a candidate to check against your versions and setup, not yet an answer"
    return (head, *(f"{said(found)} — {found.url}" for found in shown)), bool(agreeing)


@predicate("same_cause_in_public_reports")
def same_cause_in_public_reports(report: Report) -> list[PredicateEvidence]:
    """Public reports of the same error whose threads found one cause: what others found, an answer by itself."""
    evidence, agreed = _public_reports(report)
    return evidence if agreed else []


@predicate("same_error_in_public_reports")
def same_error_in_public_reports(report: Report) -> list[PredicateEvidence]:
    """Public reports of the same error, each thread with its own cause (or one thread): candidates beside the text's
    own reading, never the answer by themselves."""
    evidence, agreed = _public_reports(report)
    return [] if agreed else evidence
