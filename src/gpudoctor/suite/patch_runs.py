"""Patch verification and carry-on as runs of the schedule: a failing run that a known issue with a patch explains
is rerun with the patch; once every such rerun passed, what the failure kept from running runs on with it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpudoctor.model import Finding, Outcome, ProbeResult, Report
from gpudoctor.patches import PATCH_FILES_ENV, PATCH_MODULES, patch_file
from gpudoctor.suite.plan import PlannedRun
from gpudoctor.suite.schedule import Schedule, ScheduledRun, ScheduleHandler

PATCHED_PREFIX = "with patch"
# The findings that one result alone shows (the doctor matches the known issues over a report of that result).
ExplainOne = Callable[[ProbeResult], Iterable[Finding]]


@dataclass(frozen=True)
class PatchCheck:
    """One verifying rerun: ``run_id`` failed as ``finding`` explains, and is rerun with ``patch`` applied."""

    finding: str
    patch: str
    run_id: str


def with_patches(run: PlannedRun, patches: Sequence[str]) -> PlannedRun:
    """``run`` with ``patches`` applied (the probe's harness runs their files first), labelled with them."""
    env = {PATCH_FILES_ENV: os.pathsep.join(str(patch_file(patch)) for patch in patches)}
    invocation = dataclasses.replace(run.invocation, extra_env={**run.invocation.extra_env, **env})
    return dataclasses.replace(run, invocation=invocation, label=f"{PATCHED_PREFIX} {', '.join(patches)}")


def unblocked_by(planned: Sequence[PlannedRun], results: Mapping[str, ProbeResult], fixed: Iterable[str]) -> list[str]:
    """The runs skipped, directly or through a chain of skipped runs, because a run in ``fixed`` did not pass, in
    plan order: what a patch that fixes ``fixed`` lets run. A run skipped for a reason known before it started (no
    CUDA device, a missing package) stays skipped: the patch changes nothing there."""
    reached = set(fixed)
    blocked: list[str] = []
    for run in planned:  # plan order puts prerequisites first, so one pass follows every chain
        result = results.get(run.run_id)
        if (
            run.run_id not in reached
            and run.skip_reason is None
            and result is not None
            and result.outcome is Outcome.SKIPPED
            and reached.intersection(run.prerequisites)
        ):
            blocked.append(run.run_id)
            reached.add(run.run_id)
    return blocked


class PatchRuns(ScheduleHandler):
    """Adds to the schedule, as its plan's results come: a rerun with the patch of each failing run that a known
    issue with a patch explains (each a round of its own); once nothing is left, the runs a verified patch
    unblocked, with every verified patch applied (one more round). The runs the patch fixed keep their real
    (failing) result: the stack as it is still fails there; the runs carried on are labelled "with patch ID"."""

    def __init__(self, schedule: Schedule, explain: ExplainOne) -> None:
        self._explain = explain
        self._plan = {run.run_id: run for run in schedule.runs()}
        self._checks: dict[int, PatchCheck] = {}  # verifying round -> what it checks
        self._reruns: dict[tuple[str, str], ProbeResult] = {}  # (finding, run id) -> the rerun's own result
        self._carry_on_decided = False
        self._carried: int | None = None  # the carry-on's round, if there is one
        self._blocked: frozenset[str] = frozenset()
        for result in schedule.known().values():  # a rerun keeps results: their patches are verified again
            self._verify(schedule, result)

    def on_result(self, schedule: Schedule, run: ScheduledRun, result: ProbeResult) -> None:
        if run.round == 0:
            self._verify(schedule, result)
        elif (check := self._checks.get(run.round)) is not None:
            self._reruns[(check.finding, check.run_id)] = result

    def on_idle(self, schedule: Schedule) -> None:
        if not self._carry_on_decided and schedule.stopped is None:
            self._carry_on_decided = True
            self._carry_on(schedule)

    def _verify(self, schedule: Schedule, result: ProbeResult) -> None:
        if not result.outcome.is_problem or result.patched or result.id not in self._plan:
            return
        for finding, patch in self._patches_for(result):
            number = schedule.add([with_patches(self._plan[result.id], [patch])])
            self._checks[number] = PatchCheck(finding, patch, result.id)

    def _patches_for(self, result: ProbeResult) -> list[tuple[str, str]]:
        """The findings with a patch that ``result`` alone shows, and their patches."""
        found = [f for f in self._explain(result) if result.id in f.runs]
        return [(f.id, f.patch) for f in found if f.patch is not None and f.patch in PATCH_MODULES]

    def _verified(self) -> dict[str, str]:
        """Finding -> patch, for each finding whose every rerun passed."""
        checks_of: dict[str, list[PatchCheck]] = {}
        for check in self._checks.values():
            checks_of.setdefault(check.finding, []).append(check)
        return {f: checks[0].patch for f, checks in checks_of.items() if all(self._passed(c) for c in checks)}

    def _passed(self, check: PatchCheck) -> bool:
        rerun = self._reruns.get((check.finding, check.run_id))
        return rerun is not None and rerun.outcome is Outcome.PASS

    def _carry_on(self, schedule: Schedule) -> None:
        verified = self._verified()
        fixed = {
            check.run_id: self._reruns[(check.finding, check.run_id)]
            for check in self._checks.values()
            if check.finding in verified
        }
        known = schedule.known()
        blocked = unblocked_by(schedule.runs(), known, fixed)
        if not blocked:
            return
        patches = sorted(set(verified.values()))  # the same label whichever rerun ended first
        runs = [with_patches(run, patches) if run.run_id in blocked else run for run in schedule.runs()]
        given = {**{run_id: r for run_id, r in known.items() if run_id not in blocked}, **fixed}
        self._carried = schedule.add(runs, given=given)  # the fixed runs gate it by their passing reruns
        self._blocked = frozenset(blocked)

    def results(self, schedule: Schedule) -> tuple[ProbeResult, ...]:
        """The report's results: the plan's, with the runs carried on replacing their skipped results."""
        plan = schedule.results()
        if self._carried is None:
            return plan
        carried = {result.id: result for result in schedule.results(self._carried)}
        return tuple(carried[result.id] if result.id in self._blocked else result for result in plan)

    def noted(self, report: Report) -> Report:
        """``report`` with each finding's patch verification: fixed only when every rerun passed."""
        return dataclasses.replace(report, findings=tuple(self._noted(f, report) for f in report.findings))

    def _noted(self, finding: Finding, report: Report) -> Finding:
        if finding.patch is None or finding.patch not in PATCH_MODULES:
            return finding
        failing = [run_id for run_id in finding.runs if run_id in self._plan and _fails_as_it_is(report, run_id)]
        reruns = [r for run_id in failing if (r := self._reruns.get((finding.id, run_id))) is not None]
        if not failing or len(reruns) < len(failing) or any(r.outcome is Outcome.INTERRUPTED for r in reruns):
            return finding  # not tried, or stopped: nothing verified either way
        verified = all(r.outcome is Outcome.PASS for r in reruns)
        notes = [
            f"{run_id} rerun with the patch: {r.outcome.value} ({r.summary}); by hand: {r.command}"
            for run_id, r in zip(failing, reruns, strict=True)
        ]
        headline = f"fixed by patch {finding.patch}" if verified else f"patch {finding.patch} did not fix it"
        return dataclasses.replace(finding, patch_verified=verified, patch_note=headline + ": " + "; ".join(notes))


def _fails_as_it_is(report: Report, run_id: str) -> bool:
    result = report.result(run_id)
    return result is not None and result.outcome.is_problem and not result.patched
