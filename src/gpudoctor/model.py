"""The types every part of gpudoctor speaks: environment facts, probe specs and results, findings, reports.

Frozen dataclasses; they are the one definition of a report's shape: ``codec`` encodes, decodes and validates them
and generates the JSON schema from them, so a report round-trips through JSON unchanged.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpudoctor.kernelsection import KernelSection
from gpudoctor.protocol import OWN_RUN_IDS, DetailKey
from gpudoctor.stackfacts import StackFacts

SCHEMA_VERSION = 1


class Severity(enum.StrEnum):  # a StrEnum: a report's JSON and its text hold the same words they always did
    """How much a finding matters: a problem (something breaks; the doctor exits 1) or a notice (worth knowing)."""

    PROBLEM = "problem"
    NOTICE = "notice"


class Relation(enum.StrEnum):
    """How a finding folded into a failure's verdict stands to the finding that leads it: what supports that cause
    (the failure's own text read by a general rule, the probe beside it), or what follows from it (the race a
    divergent barrier causes, the error read back at the next call)."""

    EVIDENCE = "evidence"
    CONSEQUENCE = "consequence"


class Outcome(str, enum.Enum):
    """What happened when a probe ran."""

    PASS = "pass"
    FAIL = "fail"
    CRASH = "crash"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"  # the session was stopped (quit, Ctrl-C, SIGTERM) before the run ended

    @property
    def is_problem(self) -> bool:
        """A result that makes the doctor exit 1."""
        return self in (Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT)

    @property
    def says_something(self) -> bool:
        """Whether the outcome tells anything about the stack (skipped and interrupted runs do not)."""
        return self not in (Outcome.SKIPPED, Outcome.INTERRUPTED)

    @property
    def word(self) -> str:
        """The outcome as every face names it: a problem in capitals, to stand out in a column of passes."""
        return self.value.upper() if self.is_problem else self.value


class Device(str, enum.Enum):
    """Where a probe variant runs."""

    CPU = "cpu"
    CUDA = "cuda"
    NONE = "none"  # the probe does not take a device (e.g. an import check)


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML sees it; a field NVML could not give is None."""

    index: int
    name: str | None = None
    compute_capability: str | None = None
    memory_total_mib: int | None = None
    mig_mode: bool | None = None


@dataclass(frozen=True)
class Driver:
    """The NVIDIA driver as NVML reports it. ``status`` says why the rest may be absent."""

    status: str  # "ok", "no NVIDIA driver", or "NVML error: ..."
    version: str | None = None
    cuda_driver_version: str | None = None  # e.g. "13.0", from nvmlSystemGetCudaDriverVersion_v2
    gpus: tuple[Gpu, ...] = ()

    @property
    def available(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Platform:
    """The host apart from the GPU stack."""

    python: str
    python_implementation: str
    os: str
    os_release: str | None
    kernel: str | None
    libc: str | None
    machine: str


@dataclass(frozen=True)
class Environment:
    """Everything the inventory learned without importing torch or MAX or initialising CUDA.

    ``packages`` maps distribution names to versions, None meaning "not installed"; it describes the
    interpreter the probes run in, which ``python`` names (redacted).
    """

    platform: Platform
    driver: Driver
    packages: Mapping[str, str | None]
    env_vars: Mapping[str, str]
    python_executable: str
    mojo_cli: str | None = None  # where a `mojo` executable was found next to the examined interpreter
    # Read without importing: where torch/max/mojo/cuda/... would be imported from, the CUDA version torch was built
    # for, build and load facts, the driver's files; empty in reports from before they were collected.
    stack: StackFacts = field(default_factory=StackFacts)

    @property
    def cuda_device_visible(self) -> bool:
        """Whether a probe could see a CUDA device: a driver with GPUs, not hidden by CUDA_VISIBLE_DEVICES."""
        if not self.driver.available or not self.driver.gpus:
            return False
        visible = self.env_vars.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            return True
        return visible.strip() not in ("", "-1", "none", "NoDevFiles")

    @property
    def max_packaging(self) -> str | None:
        """How the installed MAX is packaged, and which Mojo compiler it brings: the packaging moved twice (one
        ``max`` wheel with the compiler bundled until 25.5; max-core and mojo-compiler from 25.6; the Mojo
        standard library split into mojo-compiler-mojo-libs with 26.7). None without MAX."""
        packages = self.packages
        max_version = packages.get("max")
        if not max_version:
            return None
        compiler = packages.get("mojo-compiler")
        if not packages.get("max-core") or not compiler:
            return f"one max wheel, its Mojo compiler bundled (MAX {max_version}; packaging of 25.3-25.5)"
        if packages.get("mojo-compiler-mojo-libs"):
            return f"max, max-core, mojo-compiler {compiler}, mojo-compiler-mojo-libs (packaging of 26.7 on)"
        return f"max, max-core, mojo-compiler {compiler} (packaging of 25.6-26.6)"


@dataclass(frozen=True)
class ProbeSpec:
    """A probe as the catalog declares it: which script, on which devices, needing what, after what."""

    id: str
    script: str
    title: str
    stage: int = 0
    devices: tuple[Device, ...] = (Device.NONE,)
    needs_packages: tuple[str, ...] = ()
    after: tuple[str, ...] = ()  # probe ids that must pass first
    timeout_s: float = 300.0
    args: tuple[str, ...] = ()
    details: tuple[str, ...] = ()  # the detail keys the probe may publish (declared in catalog.toml)

    def run_id(self, device: Device) -> str:
        return self.id if device is Device.NONE else f"{self.id}/{device.value}"


@dataclass(frozen=True)
class Frame:
    """One Python frame from a faulthandler dump or a traceback."""

    file: str
    line: int | None
    function: str
    thread: str | None = None


@dataclass(frozen=True)
class NativeFrame:
    """One native frame from a debugger's backtrace: its number in its thread, the function (or address) and the
    shared library or source file it is in."""

    thread: str  # "crashing thread" or the debugger's thread label
    number: int
    function: str
    where: str | None = None


@dataclass(frozen=True)
class NativeStacks:
    """What a debugger saw of a process: the frames (the crashing thread's first), which tool, and how it was
    taken (a second run under it that crashed the same way, attached before a kill), or why there are none."""

    tool: str | None
    how: str
    frames: tuple[NativeFrame, ...] = ()


@dataclass(frozen=True)
class StepTime:
    """Where a probe process spent its wall time: one step, from its start (seconds after the process was
    started) for its duration. The first is the interpreter's own start, the last its shutdown."""

    name: str
    start_s: float = field(metadata={"digits": 3})  # reports store times to the millisecond (codec rounds)
    duration_s: float = field(metadata={"digits": 3})


@dataclass(frozen=True)
class ProbeResult:
    """What one probe run produced. Every field but ``id``, ``outcome`` and ``duration_s`` may be empty."""

    id: str
    probe: str
    device: Device
    outcome: Outcome
    duration_s: float = field(metadata={"digits": 3})  # reports store it to the millisecond (codec rounds)
    command: str = ""
    summary: str = ""
    exit_code: int | None = None
    signal: str | None = None
    exception_type: str | None = None
    message: str | None = None
    skip_reason: str | None = None
    last_step: str | None = None
    frames: tuple[Frame, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    stdout_tail: str = ""
    stderr_tail: str = ""
    steps: tuple[StepTime, ...] = ()  # where the wall time went (empty when the process never ran)
    # user + system CPU time of the probe process and the children it waited for; its peak resident memory
    cpu_s: float | None = field(default=None, metadata={"digits": 3})
    peak_rss_mib: float | None = field(default=None, metadata={"digits": 1})
    # `gpudoctor run`: native frames where a debugger could take them, and the shared libraries the process had
    # mapped when it ended (as last seen; redacted paths)
    native: NativeStacks | None = field(default=None, metadata={"omit_empty": True})
    mapped_libraries: tuple[str, ...] = field(default=(), metadata={"omit_empty": True})

    @property
    def patched(self) -> bool:
        """Whether this run had a patch applied (a verified patch carried the run on): its outcome is the stack's
        with the fix in, not the stack's as it is."""
        return bool(self.details.get(DetailKey.PATCHES_APPLIED))


@dataclass(frozen=True)
class Finding:
    """A known issue that matched this report, with the evidence that matched."""

    id: str
    title: str
    severity: Severity = field(default=Severity.PROBLEM, kw_only=True)
    evidence: tuple[str, ...]
    runs: tuple[str, ...] = field(default=(), kw_only=True)  # the run ids whose results matched the evidence
    explanation: str
    fix: str
    references: tuple[str, ...] = ()
    patch: str | None = None
    patch_verified: bool | None = None  # None: not tried; True only when the patched rerun passed
    patch_note: str | None = None
    # One verdict per failure (knowledge.verdict): a finding that supports, or follows from, the one that leads the
    # verdict names it here and is a notice; the faces say it inside the leading finding. Absent otherwise (so
    # reports recorded before keep their ids).
    part_of: str | None = field(default=None, kw_only=True, metadata={"omit_none": True})
    relation: Relation | None = field(default=None, kw_only=True, metadata={"omit_none": True})

    @property
    def is_problem(self) -> bool:
        """A finding that makes the doctor exit 1."""
        return self.severity == Severity.PROBLEM


@dataclass(frozen=True)
class Report:
    """One run of the doctor: where, what ran, what it found."""

    # Fields are encoded in the order declared here (keyword-only ones too): schema_version first, as it always was.
    schema_version: int = field(default=SCHEMA_VERSION, kw_only=True)
    doctor_version: str
    created: str  # ISO 8601 UTC timestamp
    environment: Environment
    results: tuple[ProbeResult, ...] = ()
    findings: tuple[Finding, ...] = ()
    kernel: KernelSection | None = None  # `gpudoctor kernel`: the package, its scan and the calls made

    @property
    def exit_code(self) -> int:
        """0 when every probe that ran passed and no problem was found; 1 otherwise.

        A problem finding without a failing probe counts too: a kernel that indexes device tensors from
        host code passes on the CPU yet is broken on every GPU.
        """
        return 1 if self.problem_runs or self.problem_findings else 0

    @property
    def problem_runs(self) -> int:
        """How many runs failed, crashed or timed out."""
        return sum(r.outcome.is_problem for r in self.results)

    @property
    def problem_findings(self) -> int:
        """How many findings are problems (not notices)."""
        return sum(f.is_problem for f in self.findings)

    def findings_in_order(self) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
        """The findings as a report about a failure reads them: first what explains it (findings on a failing run,
        problems before notices, then the other problems), then the notices that bear on no failing run
        (environment notices), which the text and Markdown faces give one line each. With no failing run, every
        finding leads, in the order found."""
        own = tuple(f for f in self.findings if f.part_of is None)  # the rest is said inside the finding it is part of
        failing = {r.id for r in self.results if r.outcome.is_problem}
        if not failing:
            return own, ()
        on_failure = [f for f in own if failing & set(f.runs)]
        rest = [f for f in own if f not in on_failure]
        leading = sorted(on_failure, key=lambda f: not f.is_problem) + [f for f in rest if f.is_problem]
        return tuple(leading), tuple(f for f in rest if not f.is_problem)

    def parts_of(self, lead: Finding) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
        """What the faces say inside ``lead`` (knowledge.verdict): the findings that support it, and those that
        follow from it."""
        mine = [f for f in self.findings if f.part_of == lead.id]
        return (tuple(f for f in mine if f.relation is Relation.EVIDENCE),
                tuple(f for f in mine if f.relation is Relation.CONSEQUENCE))  # fmt: skip

    @property
    def interrupted(self) -> bool:
        """Whether the session was stopped before every run ended."""
        return any(r.outcome is Outcome.INTERRUPTED for r in self.results)

    def result(self, run_id: str) -> ProbeResult | None:
        return next((r for r in self.results if r.id == run_id), None)

    def own_result(self) -> ProbeResult | None:
        """The run of the user's own command (`gpudoctor run`) or log (`gpudoctor explain`) this report is about;
        None for the doctor's own report."""
        return next((r for run_id in OWN_RUN_IDS if (r := self.result(run_id)) is not None), None)
