"""What should I pin? The matrix's passing environments this one can reach by installing something else, and its
record of the failing probes along the MAX releases on this machine. Answers are data; the doctor words them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from gpudoctor.matrix.query import PROBED_FIELDS, differences, timelines
from gpudoctor.matrix.schema import Row, environment_key, probe_outcomes
from gpudoctor.model import Report

# What a user can change by installing something else; the rest (GPU, OS, architecture) is the machine.
PINNABLE = ("torch", "max", "mojo-compiler", "cuda-core", "torch_cuda", "python", "driver", "cuda_driver")


@dataclass(frozen=True)
class PinOption:
    """A passing row this environment can reach by changing only pinnable things: the changes, and which of
    the probes that fail here pass there."""

    row: Row
    changes: list[tuple[str, str, str]]  # (field, here, there)
    fixes: list[str]  # probe runs with a problem here that pass there

    def change_text(self) -> str:
        return ", ".join(f"{k} {a} → {b}" for k, a, b in self.changes) or "the same environment"

    def commands(self) -> list[str]:
        """How to make the change: pip pins for packages, words for the rest."""
        out, pins = [], []
        for key, _, there in self.changes:
            if there == "-":
                continue
            if key in ("torch", "max", "mojo-compiler", "cuda-core"):
                pins.append(f"'{key}=={there}'")
            elif key == "driver":
                out.append(f"NVIDIA driver {there}")
            elif key == "python":
                out.append(f"Python {there}")
        if pins:
            out.insert(0, "pip install " + " ".join(pins))
        return out


def pin_options(report: Report, rows: Sequence[Row], known: Iterable[str], count: int = 3) -> list[PinOption]:
    """The passing rows nearest this environment on the same machine (GPU, OS, architecture), fewest changes
    first: "what should I pin?". Empty when nothing here has a problem."""
    here = environment_key(report)
    own = probe_outcomes(report, known)
    failing = sorted(probe for probe, result in own.items() if result.outcome.is_problem)
    if not failing:
        return []
    machine = {k: v for k, v in here.items() if k not in PINNABLE}
    options = []
    for row in rows:
        if any(row.environment.get(k) != v for k, v in machine.items()):
            continue
        if not row.results or any(r.outcome.is_problem for r in row.results.values()):
            continue
        fixes = [p for p in failing if p in row.results and row.results[p].outcome.value == "pass"]
        if not fixes:
            continue
        ignore = {key for key in PROBED_FIELDS if key not in here} | {"cuda_driver"}
        changes = [c for c in differences(here, row.environment, ignore) if c[0] in PINNABLE]
        changed = {key for key, _, _ in changes}
        # torch's CUDA build comes with the torch wheel, the Mojo compiler with max: not separate changes.
        changes = [
            c for c in changes
            if not (c[0] == "torch_cuda" and "torch" in changed) and not (c[0] == "mojo-compiler" and "max" in changed)
        ]  # fmt: skip
        if not changes:
            continue
        options.append(PinOption(row, changes, fixes))
    options.sort(key=lambda o: (len(o.changes), sum(_jump(a, b) for _, a, b in o.changes), -len(o.fixes)))
    return options[:count]


def _jump(a: str, b: str) -> int:
    """How far apart two versions are (major and minor steps), to prefer the smallest change among equals."""
    try:
        va, vb = Version(a), Version(b)
    except InvalidVersion:
        return 1000
    return abs(va.major - vb.major) * 100 + abs(va.minor - vb.minor)


def machine_timelines(report: Report, rows: Sequence[Row], probes: Iterable[str]) -> list[str]:
    """The matrix's story of ``probes`` along the MAX releases on this machine (same GPU, driver, torch, OS and
    architecture), one sentence each: "on an NVIDIA H100 80GB HBM3 with driver 580.159.04 (torch 2.11.0):
    custom-op-params/cuda fail on max 25.4.0; pass on max 25.5.0 … 26.7.0"."""
    here = environment_key(report)
    same = ("gpu", "driver", "torch", "os", "arch")
    mine = [r for r in rows if all(r.environment.get(k) == here.get(k) for k in same if k in here)]
    wanted = set(probes)
    sentences = []
    for line in timelines(mine, ("max",)):
        if line.probe in wanted:
            spans = "; ".join(
                f"{s.label} on max {s.first}" + ("" if s.first == s.last else f" … {s.last}") for s in line.spans
            )
            machine = "the CPU" if here.get("gpu", "cpu") == "cpu" else f"an {here.get('gpu')}"
            driver = f" with driver {here.get('driver')}" if here.get("driver") else ""
            sentences.append(f"on {machine}{driver} (torch {here.get('torch')}): {line.probe} {spans}")
    return sentences
