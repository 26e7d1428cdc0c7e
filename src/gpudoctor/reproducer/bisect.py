"""`gpudoctor bisect`: the user's reproducer in sweep cells, one MAX release per cell, searching for the releases
where how it ends changes — last good, first bad — without examining every release.

A cell's run ends in a *way*: it passes, or fails in a way named by its outcome and what identifies it (the signal,
the exception type, the knowledge base's finding for it). The *reference* is the release where the user sees the
failure (``--bad``, else the newest of the range); its way is "bad". From it the search goes both ways through the
releases, k-section by k-section (k = cells at once), for the nearest release that ends another way: "good" when
it passes, "fails another way" otherwise (a reproducer written for one API generation fails to compile or import on
others: that is not the bug being chased, and the report says so apart). When the way is the same on each side up
to the change, that is O(log n) cells; ``--scan`` examines every release.

The search is pure (``BisectSearch``: which cells next, given what the cells examined so far showed); running the
cells is the sweep's (its environments, kept results, ``--parallel``, ``--ray``).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpudoctor.model import Outcome, Report
from gpudoctor.reproducer.command import RUN_ID


class Verdict(str, enum.Enum):
    GOOD = "good"  # it passes
    BAD = "bad"  # it ends the way it ends on the reference release
    OTHER = "fails another way"  # another failure (often: the reproducer is written for another API generation)
    NOT_BUILT = "not built"  # the cell's environment could not be built (unresolvable, a missing wheel)


@dataclass(frozen=True)
class Way:
    """How the reproducer ended in one cell, as far as telling releases apart needs: outcome and what names it."""

    outcome: str  # pass, fail, crash, timeout, interrupted, or "not built"
    detail: str = ""  # the signal, the exception type, the finding that explains it

    @property
    def label(self) -> str:
        return self.outcome if not self.detail else f"{self.outcome} ({self.detail})"


def way_of(report: Report | None, reason: str = "") -> Way:
    """The way a cell's reproducer run ended (a cell without a report was not built: ``reason`` says why)."""
    result = report.result(RUN_ID) if report is not None else None
    if report is None or result is None:
        return Way("not built", reason.splitlines()[0][:160] if reason else "")
    if result.outcome is Outcome.PASS:
        return Way("pass")
    named = sorted(f.id for f in report.findings if RUN_ID in f.runs and f.is_problem)
    if result.outcome is Outcome.CRASH:
        detail = result.signal or "crash"
    elif result.outcome is Outcome.FAIL:
        detail = result.exception_type or f"exit status {result.exit_code}"
    else:
        detail = ""
    return Way(result.outcome.value, ", ".join([d for d in (detail,) if d] + named))


@dataclass
class _Side:
    """One direction of the search from the reference: the nearest index known to end the reference's way
    (``near``), and the nearest known to end another way (``far``; one past the range's end when none is)."""

    step: int  # -1 toward older releases, +1 toward newer
    near: int
    far: int

    @property
    def open(self) -> list[int]:
        low, high = sorted((self.near, self.far))
        return list(range(low + 1, high))


@dataclass
class BisectSearch:
    """Which cells to examine next, from what the examined ones showed. Indexes are into ``versions`` (oldest
    first); ``record`` what each examined cell showed; ``next`` gives the next cells (empty: done)."""

    versions: Sequence[str]
    reference: int
    scan: bool = False
    ways: dict[int, Way] = field(default_factory=dict)
    _sides: list[_Side] = field(default_factory=list)

    def record(self, index: int, way: Way) -> None:
        self.ways[index] = way
        if index == self.reference and not self._sides:
            self._sides = [_Side(-1, index, -1), _Side(+1, index, len(self.versions))]
        reference = self.ways.get(self.reference)
        for side in self._sides:  # walk out from the reference: the same way up to the first examined change
            side.near, side.far = self.reference, (-1 if side.step < 0 else len(self.versions))
            for probe in range(self.reference + side.step, side.far, side.step):
                if probe in self.ways:
                    if self.ways[probe] != reference:
                        side.far = probe
                        break
                    side.near = probe

    def verdict(self, index: int) -> Verdict:
        way = self.ways[index]
        if way.outcome == "not built":
            return Verdict.NOT_BUILT
        if way.outcome == "pass":
            return Verdict.GOOD
        reference = self.ways.get(self.reference)
        if reference is not None and reference.outcome == "pass":
            return Verdict.BAD  # the reference passes: any failure is what is looked for
        return Verdict.BAD if way == reference else Verdict.OTHER

    def next(self, at_once: int = 1) -> list[int]:
        if self.reference not in self.ways:
            return [self.reference]
        if self.scan:
            return [i for i in range(len(self.versions)) if i not in self.ways][:at_once]
        sides = [side for side in self._sides if side.open]
        picks: list[int] = []
        for n, side in enumerate(sides):
            share = max(1, at_once // len(sides) + (1 if n < at_once % len(sides) else 0))
            gap = side.open if side.step > 0 else side.open[::-1]  # nearest first
            # k-section: k points dividing the open gap evenly (k = 1: its middle, the nearer one of two)
            points = [gap[((len(gap) + 1) * (j + 1)) // (share + 1) - 1] for j in range(min(share, len(gap)))]
            picks += [p for p in dict.fromkeys(points) if p not in self.ways]
        return picks[: max(1, at_once)]


@dataclass(frozen=True)
class Transition:
    """Where the way changes between two releases examined next to each other in the search: exact when they are
    neighbours in the range, else somewhere between them (not pinpointed)."""

    before: str
    after: str
    way_before: Way
    way_after: Way
    exact: bool
    verdict_before: Verdict
    verdict_after: Verdict


def transitions(search: BisectSearch) -> list[Transition]:
    examined = sorted(search.ways)
    found = []
    for low, high in itertools.pairwise(examined):
        if search.ways[low] != search.ways[high]:
            found.append(Transition(search.versions[low], search.versions[high], search.ways[low],
                                    search.ways[high], high == low + 1, search.verdict(low),
                                    search.verdict(high)))  # fmt: skip
    return found
