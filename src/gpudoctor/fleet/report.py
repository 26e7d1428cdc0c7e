"""A fleet's results: one NodeRun per node (each holding the doctor's reports from that node), grouped by
environment and outcome, with the odd nodes out and what sets them apart. Pure data and analysis, no Ray: the
analysis returns data (outcomes, differences, odd nodes) and the faces (fleet/render.py, the fleet view) word it.

Node names are private: a node is "node 3" unless the user asked for host names (``--show-hosts``). The JSON
(``FleetReport.to_dict``, version ``FLEET_SCHEMA_VERSION``) holds the same data and no sentence: the faces word it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.matrix.schema import environment_key
from gpudoctor.model import Device, Outcome, Report
from gpudoctor.report.codec import encode

FLEET_SCHEMA_VERSION = 1  # 1: the odd ones out as data (before it, unversioned, as sentences)


def shows_as_problem(outcome: Outcome) -> bool:
    """Whether a run is listed among a node's (or a group's) problems in the fleet's faces: every outcome but
    pass and skipped. Unlike ``Outcome.is_problem`` an interrupted run is listed too: it did not end."""
    return outcome not in (Outcome.PASS, Outcome.SKIPPED)


def problem_runs(outcomes: Mapping[str, Outcome]) -> tuple[str, ...]:
    """The run ids whose outcome `shows_as_problem`, sorted."""
    return tuple(sorted(run for run, outcome in outcomes.items() if shows_as_problem(outcome)))


class NodeStatus(enum.Enum):
    DONE = "done"  # the doctor ran there and reported
    LOST = "lost"  # the node (or the worker running the doctor) died mid-run
    TIMEOUT = "timeout"  # no answer within the node time limit; its task was cancelled
    FAILED = "failed"  # the doctor could not run there (an error, in its own words)
    INTERRUPTED = "interrupted"  # the fleet run was stopped before the node answered


@dataclass(frozen=True)
class NodeRun:
    """One node: its label ("node 2"), where it is (only shown with --show-hosts), and what came back."""

    label: str
    status: NodeStatus
    reports: tuple[Report, ...] = ()  # one per doctor run there: the CPU run, then one per GPU
    reason: str = ""
    host: str | None = None  # hostname and address, None unless the user asked
    duration_s: float = 0.0

    @property
    def outcomes(self) -> dict[str, Outcome]:
        """Run id (with ``:gpuN`` for per-GPU runs) → outcome, over all of the node's reports."""
        found: dict[str, Outcome] = {}
        for index, report in enumerate(self.reports):
            suffix = f":gpu{index - 1}" if index > 0 else ""
            for result in report.results:
                if result.outcome is not Outcome.SKIPPED or not suffix:
                    found[result.id + suffix] = result.outcome
        return found

    @property
    def problems(self) -> tuple[str, ...]:
        """The runs listed as the node's problems (see `shows_as_problem`), sorted."""
        return problem_runs(self.outcomes)

    @property
    def environment(self) -> dict[str, str | int]:
        return environment_key(self.reports[0]) if self.reports else {}

    @property
    def findings(self) -> tuple[str, ...]:
        return tuple(sorted({f.id for report in self.reports for f in report.findings if f.is_problem}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "status": self.status.value,
            "reason": self.reason,
            "host": self.host,
            "duration_s": round(self.duration_s, 3),
            "environment": self.environment,
            "outcomes": _outcome_values(self.outcomes),
            "findings": list(self.findings),
            "reports": [encode(report) for report in self.reports],
        }


@dataclass(frozen=True)
class Group:
    """Nodes with the same environment and the same outcomes."""

    labels: tuple[str, ...]
    environment: Mapping[str, str | int]
    outcomes: Mapping[str, Outcome]
    findings: tuple[str, ...]

    @property
    def problems(self) -> tuple[str, ...]:
        """The runs listed as the group's problems (see `shows_as_problem`), sorted."""
        return problem_runs(self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": list(self.labels),
            "environment": dict(self.environment),
            "outcomes": _outcome_values(self.outcomes),
            "findings": list(self.findings),
        }


def _outcome_values(outcomes: Mapping[str, Outcome]) -> dict[str, str]:
    return {run: outcome.value for run, outcome in outcomes.items()}


@dataclass(frozen=True)
class EnvironmentDifference:
    """An environment key whose value on the node differs from the majority's (None: the key is absent)."""

    key: str
    here: str | int | None
    there: str | int | None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "environment", "key": self.key, "here": self.here, "there": self.there}


@dataclass(frozen=True)
class OutcomeDifference:
    """A run whose outcome on the node differs from the majority's (None: the run did not happen)."""

    run_id: str
    here: Outcome | None
    there: Outcome | None

    def to_dict(self) -> dict[str, Any]:
        here, there = (None if o is None else o.value for o in (self.here, self.there))
        return {"kind": "outcome", "run": self.run_id, "here": here, "there": there}


@dataclass(frozen=True)
class FindingDifference:
    """A problem finding on the node but not on the majority (``here``), or on the majority but not on it."""

    finding: str
    here: bool

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "finding", "finding": self.finding, "here": self.here}


Difference = EnvironmentDifference | OutcomeDifference | FindingDifference


@dataclass(frozen=True)
class OddNode:
    """A node that did not answer, or that answered outside the largest group, and what sets it apart."""

    label: str
    position: int  # 1-based, among all the fleet's nodes
    total: int  # the fleet's nodes
    status: NodeStatus
    reason: str = ""  # why it did not answer (its NodeRun's reason)
    differences: tuple[Difference, ...] = ()  # how it differs from the majority (empty for a node that did not answer)
    majority_size: int = 0  # how many nodes the majority it is compared with has

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "position": self.position,
            "total": self.total,
            "status": self.status.value,
            "reason": self.reason,
            "majority_size": self.majority_size,
            "differences": [d.to_dict() for d in self.differences],
        }


@dataclass(frozen=True)
class FleetReport:
    nodes: tuple[NodeRun, ...]
    created: str
    doctor_version: str
    groups: tuple[Group, ...] = field(default=())
    odd_ones: tuple[OddNode, ...] = field(default=())  # the nodes that differ from the majority, in node order

    @property
    def exit_code(self) -> int:
        problem = any(n.status is not NodeStatus.DONE for n in self.nodes) or any(
            report.exit_code for n in self.nodes for report in n.reports
        )
        return 1 if problem else 0

    @property
    def interrupted(self) -> bool:
        return any(n.status is NodeStatus.INTERRUPTED for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fleet_schema_version": FLEET_SCHEMA_VERSION,
            "doctor_version": self.doctor_version,
            "created": self.created,
            "nodes": [n.to_dict() for n in self.nodes],
            "groups": [g.to_dict() for g in self.groups],
            "odd_ones_out": [odd.to_dict() for odd in self.odd_ones],
        }


def analyse(nodes: Sequence[NodeRun], created: str, doctor_version: str) -> FleetReport:
    """Group the nodes that answered by environment and outcome, and say of each node outside the largest
    group (and of every node that did not answer) what sets it apart."""
    answered = [n for n in nodes if n.status is NodeStatus.DONE]
    buckets: dict[tuple[Any, ...], list[NodeRun]] = {}
    for node in answered:
        key = (tuple(sorted(node.environment.items())), tuple(sorted(node.outcomes.items())), node.findings)
        buckets.setdefault(key, []).append(node)
    groups = sorted(
        (Group(tuple(n.label for n in members), members[0].environment, members[0].outcomes, members[0].findings)
         for members in buckets.values()),
        key=lambda g: -len(g.labels),
    )  # fmt: skip
    total = len(nodes)
    odd: list[OddNode] = []
    majority = groups[0] if groups else None
    position = {n.label: i + 1 for i, n in enumerate(nodes)}
    for node in nodes:
        if node.status is not NodeStatus.DONE:
            odd.append(OddNode(node.label, position[node.label], total, node.status, node.reason))
        elif majority is not None and len(groups) > 1 and node.label not in majority.labels:
            apart = differences(node, majority)
            odd.append(OddNode(node.label, position[node.label], total, node.status, "", apart, len(majority.labels)))
    return FleetReport(tuple(nodes), created, doctor_version, tuple(groups), tuple(odd))


def differences(node: NodeRun, majority: Group) -> tuple[Difference, ...]:
    """What sets the node apart from the majority: environment keys, then runs, then problem findings, each
    sorted."""
    found: list[Difference] = []
    env = node.environment
    for key in sorted(set(env) | set(majority.environment)):
        mine, theirs = env.get(key), majority.environment.get(key)
        if mine != theirs:
            found.append(EnvironmentDifference(key, mine, theirs))
    outcomes = node.outcomes
    for run_id in sorted(set(outcomes) | set(majority.outcomes)):
        here, there = outcomes.get(run_id), majority.outcomes.get(run_id)
        if here != there:
            found.append(OutcomeDifference(run_id, here, there))
    for finding in sorted(set(node.findings) ^ set(majority.findings)):
        found.append(FindingDifference(finding, finding in node.findings))
    return tuple(found)


def node_report(node: NodeRun) -> Report | None:
    """One report for the node, as a local run on it would give: the CPU run's results with the first GPU's
    CUDA results in place of its skipped ones (a matrix row records one GPU of a kind, like a local run)."""
    if not node.reports:
        return None
    first = node.reports[0]
    if len(node.reports) == 1:
        return first
    gpu = {r.id: r for r in node.reports[1].results if r.device is Device.CUDA}
    results = tuple(gpu.get(r.id, r) if r.device is Device.CUDA else r for r in first.results)
    results += tuple(r for r in gpu.values() if first.result(r.id) is None)
    return dataclasses.replace(first, results=results)


def contribution_reports(report: FleetReport) -> list[Report]:
    """One report per group of nodes (distinct environment and outcome): what `--contribute` records."""
    by_label = {n.label: n for n in report.nodes}
    chosen = [node_report(by_label[group.labels[0]]) for group in report.groups]
    return [r for r in chosen if r is not None]


def outcome_counts(report: FleetReport) -> Counter[str]:
    return Counter(n.status.value for n in report.nodes)
