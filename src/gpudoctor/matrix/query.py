"""Questions asked of the matrix: which rows match a filter, which are nearest an environment and what
differs, and what changing one thing did (transitions). Answers are data; faces render them.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.matrix.schema import ENV_FIELDS, Row, environment_key, probe_outcomes
from gpudoctor.model import Report

# How much a difference in each field moves an environment away from another (for `near`).
FIELD_WEIGHTS: dict[str, int] = {
    "gpu": 2,
    "compute_capability": 2,
    "gpu_count": 1,
    "driver": 1,
    "cuda_driver": 1,
    "torch": 3,
    "torch_cuda": 1,
    "max": 3,
    "mojo-compiler": 1,
    "cuda-core": 1,
    "python": 1,
    "os": 2,
    "arch": 2,
}


def parse_package_filter(text: str) -> tuple[str, SpecifierSet | None]:
    """``torch``, ``torch>=2.7`` or ``max==26.7.0`` -> (field, specifier)."""
    match = re.match(r"^\s*([A-Za-z][\w-]*)\s*(.*)$", text)
    if not match or match.group(1) not in ENV_FIELDS:
        raise GpuDoctorError(f"--package {text!r}: name one of {', '.join(ENV_FIELDS)}, optionally with a version")
    name, spec = match.group(1), match.group(2).strip()
    if not spec:
        return name, None
    if spec[0].isdigit():
        spec = "==" + spec
    try:
        return name, SpecifierSet(spec)
    except InvalidSpecifier:
        raise GpuDoctorError(f"--package {text!r}: not a version specifier like >=2.7 or ==26.7.0") from None


def filter_rows(rows: Sequence[Row], packages: Sequence[str] = (), gpu: str | None = None) -> list[Row]:
    selected = list(rows)
    for text in packages:
        name, specifier = parse_package_filter(text)
        kept = []
        for row in selected:
            value = row.environment.get(name)
            if value is None:
                continue
            if specifier is None:
                kept.append(row)
                continue
            with contextlib.suppress(InvalidVersion):
                if specifier.contains(Version(str(value)), prereleases=True):
                    kept.append(row)
        selected = kept
    if gpu:
        selected = [r for r in selected if gpu.lower() in str(r.environment.get("gpu", "")).lower()]
    return selected


def differences(
    a: Mapping[str, str | int], b: Mapping[str, str | int], ignore: Iterable[str] = ()
) -> list[tuple[str, str, str]]:
    """(field, value in a, value in b) for every key field that differs."""
    skip = set(ignore)
    return [
        (key, str(a.get(key, "-")), str(b.get(key, "-")))
        for key in ENV_FIELDS
        if key not in skip and a.get(key) != b.get(key)
    ]


def distance(a: Mapping[str, str | int], b: Mapping[str, str | int], ignore: Iterable[str] = ()) -> int:
    return sum(FIELD_WEIGHTS[key] for key, _, _ in differences(a, b, ignore))


@dataclass(frozen=True)
class Transition:
    """Two rows one key field apart whose outcomes differ: what changing that field did."""

    field: str
    before: str
    after: str
    probe: str
    outcome_before: str
    outcome_after: str

    def sentence(self) -> str:
        return (
            f"{self.field} {self.before} → {self.after} turned {self.probe} "
            f"from {self.outcome_before} to {self.outcome_after}"
        )


def outcome_changes(a: Row, b: Row) -> list[tuple[str, str, str]]:
    """(probe, label in a, label in b) for the probes both rows ran with different outcomes."""
    return [
        (probe, a.results[probe].label(), b.results[probe].label())
        for probe in sorted(set(a.results) & set(b.results))
        if (a.results[probe].outcome, a.results[probe].signal) != (b.results[probe].outcome, b.results[probe].signal)
    ]


def transitions(rows: Sequence[Row]) -> list[Transition]:
    """For every pair of rows that differ in exactly one key field (besides fields that follow from it, like
    mojo-compiler from max), the probes whose outcome changed."""
    found = []
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            diff = [d for d in differences(a.environment, b.environment) if d[0] not in _FOLLOWERS]
            if len(diff) != 1:
                continue
            key, before, after = diff[0]
            older, newer = (a, b) if _sort_key(before) <= _sort_key(after) else (b, a)
            if older is b:
                before, after = after, before
            for probe, was, now in outcome_changes(older, newer):
                found.append(Transition(key, before, after, probe, was, now))
    return found


# mojo-compiler moves with max, torch_cuda with torch: a change in them alone is not another cause.
_FOLLOWERS = {"mojo-compiler", "torch_cuda"}


def _sort_key(text: str) -> tuple[int, Any]:
    try:
        return (0, Version(text))
    except InvalidVersion:
        return (1, text)


@dataclass(frozen=True)
class Neighbour:
    row: Row
    distance: int
    differs: list[tuple[str, str, str]]  # (field, here, there)
    changed: list[tuple[str, str, str]]  # (probe, here, there), when this environment has results


# Known only from probe results: an inventory-only environment cannot be compared on them.
PROBED_FIELDS = {"torch_cuda"}


def nearest(
    environment: Mapping[str, str | int], rows: Sequence[Row], own: Row | None = None, count: int = 5
) -> list[Neighbour]:
    """The rows closest to ``environment``, closest first; with ``own`` results, which outcomes differ."""
    ignore = {key for key in PROBED_FIELDS if key not in environment}
    ranked = sorted(rows, key=lambda r: (distance(environment, r.environment, ignore), r.file_name))
    return [
        Neighbour(
            row,
            distance(environment, row.environment, ignore),
            differences(environment, row.environment, ignore),
            outcome_changes(own, row) if own is not None else [],
        )
        for row in ranked[:count]
    ]


@dataclass(frozen=True)
class Nearness:
    """The answer to `matrix near`: this environment, its own results as a row (if it ran probes), the nearest
    rows with what differs, and the transitions among them."""

    environment: Mapping[str, str | int]
    own: Row | None
    neighbours: list[Neighbour]
    transitions: list[Transition]


def near(report: Report, rows: Sequence[Row], known: Iterable[str], count: int = 5) -> Nearness:
    """The rows nearest the report's environment, what differs, and which outcomes changed."""
    here = environment_key(report)
    ran = probe_outcomes(report, known)
    own = Row(here, ran, report.doctor_version, report.created[:10]) if ran else None
    neighbours = nearest(here, rows, own, count)
    return Nearness(here, own, neighbours, transitions([n.row for n in neighbours]))


def outcome_counts(row: Row) -> dict[str, int]:
    """How many probes ended in each outcome, pass first."""
    counts: dict[str, int] = {}
    for result in row.results.values():
        counts[result.outcome.value] = counts.get(result.outcome.value, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (kv[0] != "pass", kv[0])))


def problems(row: Row) -> list[tuple[str, str]]:
    """(probe, label) for every probe that failed, crashed or timed out in the row."""
    return [(p, r.label()) for p, r in sorted(row.results.items()) if r.outcome.is_problem]


# --- timelines: what a probe did across the releases of one package, everything else equal ---------------

TIMELINE_FIELDS = ("max", "torch")


@dataclass(frozen=True)
class Span:
    """Consecutive releases (in the matrix) of one field over which a probe had one outcome."""

    label: str
    first: str
    last: str


@dataclass(frozen=True)
class Timeline:
    field: str
    context: tuple[tuple[str, str], ...]  # the fields held equal, as (field, value)
    probe: str
    spans: tuple[Span, ...]

    def sentence(self) -> str:
        where = ", ".join(f"{k} {v}" for k, v in self.context if k in ("gpu", "torch", "max", "python"))
        parts = []
        for span in self.spans:
            releases = span.first if span.first == span.last else f"{span.first} … {span.last}"
            parts.append(f"{span.label} on {self.field} {releases}")
        return f"{self.probe} ({where}): " + "; ".join(parts)


def timelines(rows: Sequence[Row], fields: Sequence[str] = TIMELINE_FIELDS) -> list[Timeline]:
    """For each field (max, torch) and each group of rows equal in every other key field (followers aside),
    the probes whose outcome changed along that field's releases, as spans of equal outcome."""
    found: list[Timeline] = []
    for varying in fields:
        ignored = {varying, *_FOLLOWERS}
        groups: dict[tuple[tuple[str, str], ...], list[Row]] = {}
        for row in rows:
            if varying not in row.environment:
                continue
            context = tuple(
                (k, str(row.environment[k])) for k in ENV_FIELDS if k not in ignored and k in row.environment
            )
            groups.setdefault(context, []).append(row)
        for context, group in sorted(groups.items()):
            if len(group) < 2:
                continue
            ordered = sorted(group, key=lambda r: _sort_key(str(r.environment[varying])))
            probes = sorted({p for r in ordered for p in r.results})
            for probe in probes:
                spans: list[Span] = []
                for row in ordered:
                    if probe not in row.results:
                        continue
                    label, value = row.results[probe].label(), str(row.environment[varying])
                    if spans and spans[-1].label == label:
                        spans[-1] = Span(label, spans[-1].first, value)
                    else:
                        spans.append(Span(label, value, value))
                if len(spans) > 1:
                    found.append(Timeline(varying, context, probe, tuple(spans)))
    return found


def on_cpu(row: Row) -> bool:
    """Whether the row was recorded on a machine without a GPU."""
    return str(row.environment.get("gpu", "cpu")) == "cpu"


def _change_points(line: Timeline) -> set[tuple[str, str, str, str, str]]:
    """(probe without its device, release before, release after, outcome before, outcome after) of a timeline."""
    base = line.probe.split("/", 1)[0]
    return {(base, a.last, b.first, a.label.split()[0], b.label.split()[0]) for a, b in itertools.pairwise(line.spans)}


def device_disagreements(rows: Sequence[Row]) -> list[str]:
    """Where the GPU rows tell another story than the CPU: a probe's cuda run against its cpu run in the same
    row, runs of one environment that did not agree, and changes along the MAX releases that GPU rows show and no
    CPU row (of any torch) shows at the same releases — a GPU-only transition."""
    found: list[str] = []
    for row in sorted(rows, key=lambda r: r.file_name):
        if on_cpu(row):
            continue
        where = f"{row.environment.get('gpu')}, torch {row.environment.get('torch')}, max {row.environment.get('max')}"
        for probe, result in sorted(row.results.items()):
            if probe.endswith("/cuda"):
                cpu = row.results.get(probe.removesuffix("/cuda") + "/cpu")
                if cpu is not None and cpu.label() != result.label():
                    found.append(f"{where}: {probe} {result.label()} where {probe.removesuffix('/cuda')}/cpu "
                                 f"{cpu.label()}")  # fmt: skip
            if result.agreeing < result.runs:
                found.append(f"{where}: {probe} {result.label()} in the last {result.agreeing} of {result.runs} runs; "
                             "the earlier ones ended otherwise")  # fmt: skip
    cpu_changes = {p for t in timelines([r for r in rows if on_cpu(r)], ("max",)) for p in _change_points(t)}
    for line in timelines([r for r in rows if not on_cpu(r)], ("max",)):
        for _base, before, after, was, became in sorted(_change_points(line) - cpu_changes):
            gpu = dict(line.context).get("gpu")
            found.append(f"{gpu}: {line.probe} {was} on max {before}, {became} on max {after} — no CPU row shows "
                         "this change at these releases (a GPU-only transition)")  # fmt: skip
    return found
