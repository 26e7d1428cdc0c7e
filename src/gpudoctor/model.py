"""The types every part of gpudoctor speaks: environment facts, probe specs and results, findings, reports.

Frozen dataclasses with ``to_dict``/``from_dict`` so that a report round-trips through JSON unchanged.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict, cast

SCHEMA_VERSION = 1


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


class Device(str, enum.Enum):
    """Where a probe variant runs."""

    CPU = "cpu"
    CUDA = "cuda"
    NONE = "none"  # the probe does not take a device (e.g. an import check)


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else str(value)


def _opt_int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    return None if value is None else int(value)


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML sees it; a field NVML could not give is None."""

    index: int
    name: str | None = None
    compute_capability: str | None = None
    memory_total_mib: int | None = None
    mig_mode: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "compute_capability": self.compute_capability,
            "memory_total_mib": self.memory_total_mib,
            "mig_mode": self.mig_mode,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Gpu:
        mig = data.get("mig_mode")
        return cls(
            index=int(data["index"]),
            name=_opt_str(data, "name"),
            compute_capability=_opt_str(data, "compute_capability"),
            memory_total_mib=_opt_int(data, "memory_total_mib"),
            mig_mode=None if mig is None else bool(mig),
        )


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "version": self.version,
            "cuda_driver_version": self.cuda_driver_version,
            "gpus": [gpu.to_dict() for gpu in self.gpus],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Driver:
        return cls(
            status=str(data["status"]),
            version=_opt_str(data, "version"),
            cuda_driver_version=_opt_str(data, "cuda_driver_version"),
            gpus=tuple(Gpu.from_dict(g) for g in data.get("gpus", ())),
        )


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "python_implementation": self.python_implementation,
            "os": self.os,
            "os_release": self.os_release,
            "kernel": self.kernel,
            "libc": self.libc,
            "machine": self.machine,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Platform:
        return cls(
            python=str(data["python"]),
            python_implementation=str(data["python_implementation"]),
            os=str(data["os"]),
            os_release=_opt_str(data, "os_release"),
            kernel=_opt_str(data, "kernel"),
            libc=_opt_str(data, "libc"),
            machine=str(data["machine"]),
        )


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
    # Read without importing: where torch/max/mojo/cuda/... would be imported from, the site-packages folders,
    # and the CUDA version torch was built for (``torch_cuda``); empty in reports from before it was collected.
    stack: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cuda_device_visible(self) -> bool:
        """Whether a probe could see a CUDA device: a driver with GPUs, not hidden by CUDA_VISIBLE_DEVICES."""
        if not self.driver.available or not self.driver.gpus:
            return False
        visible = self.env_vars.get("CUDA_VISIBLE_DEVICES")
        if visible is None:
            return True
        return visible.strip() not in ("", "-1", "none", "NoDevFiles")

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform.to_dict(),
            "driver": self.driver.to_dict(),
            "packages": dict(self.packages),
            "env_vars": dict(self.env_vars),
            "python_executable": self.python_executable,
            "mojo_cli": self.mojo_cli,
            "stack": dict(self.stack),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Environment:
        return cls(
            platform=Platform.from_dict(data["platform"]),
            driver=Driver.from_dict(data["driver"]),
            packages={str(k): (None if v is None else str(v)) for k, v in data["packages"].items()},
            env_vars={str(k): str(v) for k, v in data.get("env_vars", {}).items()},
            python_executable=str(data["python_executable"]),
            mojo_cli=_opt_str(data, "mojo_cli"),
            stack=dict(data["stack"]) if isinstance(data.get("stack"), dict) else {},
        )


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

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function, "thread": self.thread}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Frame:
        return cls(
            file=str(data["file"]),
            line=_opt_int(data, "line"),
            function=str(data["function"]),
            thread=_opt_str(data, "thread"),
        )


@dataclass(frozen=True)
class StepTime:
    """Where a probe process spent its wall time: one step, from its start (seconds after the process was
    started) for its duration. The first is the interpreter's own start, the last its shutdown."""

    name: str
    start_s: float
    duration_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "start_s": round(self.start_s, 3), "duration_s": round(self.duration_s, 3)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepTime:
        return cls(name=str(data["name"]), start_s=float(data["start_s"]), duration_s=float(data["duration_s"]))


@dataclass(frozen=True)
class ProbeResult:
    """What one probe run produced. Every field but ``id``, ``outcome`` and ``duration_s`` may be empty."""

    id: str
    probe: str
    device: Device
    outcome: Outcome
    duration_s: float
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
    cpu_s: float | None = None  # user + system CPU time of the probe process and the children it waited for
    peak_rss_mib: float | None = None  # its peak resident memory

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "probe": self.probe,
            "device": self.device.value,
            "outcome": self.outcome.value,
            "duration_s": round(self.duration_s, 3),
            "command": self.command,
            "summary": self.summary,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "exception_type": self.exception_type,
            "message": self.message,
            "skip_reason": self.skip_reason,
            "last_step": self.last_step,
            "frames": [f.to_dict() for f in self.frames],
            "details": dict(self.details),
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
            "steps": [step.to_dict() for step in self.steps],
            "cpu_s": None if self.cpu_s is None else round(self.cpu_s, 3),
            "peak_rss_mib": None if self.peak_rss_mib is None else round(self.peak_rss_mib, 1),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeResult:
        return cls(
            id=str(data["id"]),
            probe=str(data["probe"]),
            device=Device(data["device"]),
            outcome=Outcome(data["outcome"]),
            duration_s=float(data["duration_s"]),
            command=str(data.get("command", "")),
            summary=str(data.get("summary", "")),
            exit_code=_opt_int(data, "exit_code"),
            signal=_opt_str(data, "signal"),
            exception_type=_opt_str(data, "exception_type"),
            message=_opt_str(data, "message"),
            skip_reason=_opt_str(data, "skip_reason"),
            last_step=_opt_str(data, "last_step"),
            frames=tuple(Frame.from_dict(f) for f in data.get("frames", ())),
            details=dict(data.get("details", {})),
            stdout_tail=str(data.get("stdout_tail", "")),
            stderr_tail=str(data.get("stderr_tail", "")),
            steps=tuple(StepTime.from_dict(step) for step in data.get("steps", ())),
            cpu_s=None if data.get("cpu_s") is None else float(data["cpu_s"]),
            peak_rss_mib=None if data.get("peak_rss_mib") is None else float(data["peak_rss_mib"]),
        )


@dataclass(frozen=True)
class Finding:
    """A known issue that matched this report, with the evidence that matched."""

    id: str
    title: str
    evidence: tuple[str, ...]
    explanation: str
    fix: str
    severity: str = "problem"  # "problem" or "notice"
    references: tuple[str, ...] = ()
    patch: str | None = None
    patch_verified: bool | None = None  # None: not tried; True only when the patched rerun passed
    patch_note: str | None = None
    runs: tuple[str, ...] = ()  # the run ids whose results matched the evidence

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity,
            "evidence": list(self.evidence),
            "runs": list(self.runs),
            "explanation": self.explanation,
            "fix": self.fix,
            "references": list(self.references),
            "patch": self.patch,
            "patch_verified": self.patch_verified,
            "patch_note": self.patch_note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            id=str(data["id"]),
            title=str(data["title"]),
            severity=str(data.get("severity", "problem")),
            evidence=tuple(str(e) for e in data.get("evidence", ())),
            explanation=str(data["explanation"]),
            fix=str(data["fix"]),
            references=tuple(str(r) for r in data.get("references", ())),
            patch=_opt_str(data, "patch"),
            patch_verified=data.get("patch_verified"),
            patch_note=_opt_str(data, "patch_note"),
            runs=tuple(str(r) for r in data.get("runs", ())),
        )


# The `gpudoctor kernel` section of a report, as JSON-shaped types that mypy checks wherever it is read.


class KernelTensorArg(TypedDict):
    name: str
    role: str  # "output" or "input"
    dtype: str | None
    rank: int | None
    variadic: bool


class KernelSourceLine(TypedDict):
    file: str
    line: int
    text: str


class KernelOp(TypedDict):
    name: str
    struct: str | None
    file: str
    line: int
    tensors: list[KernelTensorArg]
    parameters: list[str]
    host_indexing: list[KernelSourceLine]


class KernelScan(TypedDict):
    is_package: bool
    files: list[str]
    ops: list[KernelOp]
    legacy_imports: list[KernelSourceLine]
    notes: list[str]


class KernelTensorSpec(TypedDict):
    shape: list[int]
    dtype: str


class KernelReference(TypedDict, total=False):
    expression: str
    file: str
    function: str


class KernelCallSpec(TypedDict):
    op: str
    outputs: list[KernelTensorSpec]
    inputs: list[KernelTensorSpec]
    parameters: dict[str, Any]
    values: str
    rtol: float | None
    atol: float | None
    reference: NotRequired[KernelReference | None]  # absent in reports before the reference existed


class SourceHitDict(TypedDict):
    rule: str
    file: str
    line: int
    text: str
    package: str
    accepted: str  # the releases of `package` that accept the construct (a specifier)
    accepted_here: bool | None  # by the installed release; None when the package is not installed
    rewrite: str


class SourceCheckDict(TypedDict):
    files: list[str]
    installed: dict[str, str | None]
    written_for: list[str]
    conflicts: int
    hits: list[SourceHitDict]


class KernelSection(TypedDict):
    package: str
    scan: KernelScan
    calls: list[KernelCallSpec]
    source: NotRequired[SourceCheckDict]  # the version-aware source check (absent in older reports)


@dataclass(frozen=True)
class Report:
    """One run of the doctor: where, what ran, what it found."""

    doctor_version: str
    created: str  # ISO 8601 UTC timestamp
    environment: Environment
    results: tuple[ProbeResult, ...] = ()
    findings: tuple[Finding, ...] = ()
    kernel: KernelSection | None = None  # `gpudoctor kernel`: the package, its scan and the calls made
    schema_version: int = SCHEMA_VERSION

    @property
    def exit_code(self) -> int:
        """0 when every probe that ran passed and no problem was found; 1 otherwise.

        A problem finding without a failing probe counts too: a kernel that indexes device tensors from
        host code passes on the CPU yet is broken on every GPU.
        """
        problems = any(r.outcome.is_problem for r in self.results) or any(
            f.severity == "problem" for f in self.findings
        )
        return 1 if problems else 0

    @property
    def report_id(self) -> str:
        """A content hash of the report: the same report read back from its JSON has the same id, so the matrix
        counts it once however often it is added."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def interrupted(self) -> bool:
        """Whether the session was stopped before every run ended."""
        return any(r.outcome is Outcome.INTERRUPTED for r in self.results)

    def result(self, run_id: str) -> ProbeResult | None:
        return next((r for r in self.results if r.id == run_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "doctor_version": self.doctor_version,
            "created": self.created,
            "environment": self.environment.to_dict(),
            "results": [r.to_dict() for r in self.results],
            "findings": [f.to_dict() for f in self.findings],
            **({"kernel": dict(self.kernel)} if self.kernel is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        version = data["schema_version"]
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise ValueError(f"schema version {version!r}; this gpudoctor reads version {SCHEMA_VERSION}")
        return cls(
            schema_version=SCHEMA_VERSION,
            doctor_version=str(data["doctor_version"]),
            created=str(data["created"]),
            environment=Environment.from_dict(data["environment"]),
            results=tuple(ProbeResult.from_dict(r) for r in data.get("results", ())),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", ())),
            # Shaped by report.schema.json, which the faces that read foreign reports validate against.
            kernel=cast(KernelSection, dict(data["kernel"])) if isinstance(data.get("kernel"), dict) else None,
        )
