"""Matrix rows: what a row holds, how it is built from a report, merged with an earlier row, and validated.

A row is an environment key (GPU, driver, CUDA, torch, MAX, Mojo, cuda-core, Python, OS) and the outcome of
every probe run there. Rows are data from strangers: every field is checked, nothing private is accepted.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w
from packaging.version import InvalidVersion, Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Outcome, Report
from gpudoctor.protocol import DetailKey
from gpudoctor.redact import redact_text
from gpudoctor.report.codec import report_id
from gpudoctor.tomlcheck import checked_table, plain_string, read_toml, whole_number

ROW_SCHEMA = 2
READ_SCHEMAS = (1, 2)  # schema 1 rows (before report ids) are read as rows whose earlier reports are unknown
MAX_ROW_BYTES = 64 * 1024
MAX_TEXT = 200  # characters in any string field but the note
MAX_NOTE = 1000
MAX_REPORTS = 256  # report ids a row remembers (the oldest are forgotten first)
ROWS_DIR = "rows"

# The environment key, in display order: field -> (required, kind). Absent optional fields mean "none".
ENV_FIELDS: dict[str, tuple[bool, str]] = {
    "gpu": (True, "text"),  # the GPU's name, or "cpu" where the driver reports none
    "compute_capability": (False, "capability"),
    "gpu_count": (True, "count"),
    "driver": (False, "dotted"),
    "cuda_driver": (False, "dotted"),
    "torch": (False, "version"),
    "torch_cuda": (False, "dotted"),
    "max": (False, "version"),
    "mojo-compiler": (False, "version"),
    "cuda-core": (False, "version"),
    "python": (True, "version"),
    "os": (True, "word"),
    "arch": (True, "word"),
}
RECORDED_OUTCOMES = tuple(o for o in Outcome if o.says_something)
_TOP_FIELDS = {"schema", "doctor_version", "updated", "note", "reports", "environment", "results"}
_RESULT_FIELDS = {"outcome", "signal", "runs", "agreeing", "date", "doctor"}
_PRIVATE = (
    (re.compile(r"(?i)\bGPU-[0-9a-f]{8}-"), "a GPU UUID"),
    (re.compile(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "a UUID"),
    (re.compile(r"(/home/|/Users/|C:\\Users\\)[^/\\\s]+"), "a home directory path"),
)
_KINDS = {
    "dotted": (re.compile(r"^\d+(\.\d+)*$"), "dotted numbers like 580.159.04"),
    "capability": (re.compile(r"^\d+\.\d+$"), "a compute capability like 9.0"),
    "word": (re.compile(r"^[A-Za-z0-9_.+-]{1,40}$"), "a short word like linux or x86_64"),
}
_REPORT_ID = re.compile(r"^[0-9a-f]{16}$")


class MatrixError(GpuDoctorError):
    """A row that breaks the schema, or a matrix that cannot be read or written; the message names the file."""


@dataclass(frozen=True)
class ProbeOutcome:
    """What one probe did in an environment: the latest outcome, and how many runs agreed with it."""

    outcome: Outcome
    date: str
    doctor: str
    signal: str | None = None
    runs: int = 1
    agreeing: int = 1

    def label(self) -> str:
        return f"{self.outcome.value} ({self.signal})" if self.signal else self.outcome.value

    def to_toml(self) -> dict[str, Any]:
        data: dict[str, Any] = {"outcome": self.outcome.value}
        if self.signal:
            data["signal"] = self.signal
        data.update(runs=self.runs, agreeing=self.agreeing, date=self.date, doctor=self.doctor)
        return data


@dataclass(frozen=True)
class Row:
    environment: Mapping[str, str | int]
    results: Mapping[str, ProbeOutcome]
    doctor_version: str
    updated: str
    note: str | None = None
    reports: tuple[str, ...] = ()  # ids of the reports merged into this row, each counted once
    path: Path | None = field(default=None, compare=False)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.environment)

    @property
    def file_name(self) -> str:
        return row_file_name(self.environment)

    def value(self, key: str) -> str:
        value = self.environment.get(key)
        return "-" if value is None else str(value)

    def to_toml(self) -> str:
        data: dict[str, Any] = {
            "schema": ROW_SCHEMA,
            "doctor_version": self.doctor_version,
            "updated": self.updated,
        }
        if self.note:
            data["note"] = self.note
        data["reports"] = list(self.reports)
        data["environment"] = {k: self.environment[k] for k in ENV_FIELDS if k in self.environment}
        data["results"] = {k: self.results[k].to_toml() for k in sorted(self.results)}
        return f"# A gpudoctor compatibility-matrix row (schema {ROW_SCHEMA}): see matrix/README.md.\n" + tomli_w.dumps(
            data
        )


# --- from a report -----------------------------------------------------------------------------------


def environment_key(report: Report) -> dict[str, str | int]:
    """The environment key of a report: nothing private, only what decides whether the stack works."""
    env = report.environment
    key: dict[str, str | int] = {}
    gpus = env.driver.gpus
    names = sorted({gpu.name or "unknown GPU" for gpu in gpus})
    key["gpu"] = " + ".join(names) if gpus else "cpu"
    capabilities = sorted({gpu.compute_capability for gpu in gpus if gpu.compute_capability})
    if capabilities:
        key["compute_capability"] = capabilities[0]
    key["gpu_count"] = len(gpus)
    if env.driver.version:
        key["driver"] = env.driver.version
    if env.driver.cuda_driver_version:
        key["cuda_driver"] = env.driver.cuda_driver_version
    for name in ("torch", "max", "mojo-compiler", "cuda-core"):
        if version := env.packages.get(name):
            key[name] = version
    torch_cuda = next(
        (r.details.get(DetailKey.TORCH_CUDA) for r in report.results if r.details.get(DetailKey.TORCH_CUDA)), None
    )
    if torch_cuda:
        key["torch_cuda"] = str(torch_cuda)
    key["python"] = env.platform.python
    key["os"] = env.platform.os.lower()
    key["arch"] = env.platform.machine
    return key


def fingerprint(environment: Mapping[str, str | int]) -> str:
    canonical = json.dumps({k: environment[k] for k in ENV_FIELDS if k in environment}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.+]+", "-", text.lower()).strip("-")[:40] or "x"


def row_file_name(environment: Mapping[str, str | int]) -> str:
    gpu = _slug(str(environment.get("gpu", "cpu")).replace("NVIDIA ", ""))
    torch = _slug(str(environment.get("torch", "none")))
    max_version = _slug(str(environment.get("max", "none")))
    return f"{gpu}_torch-{torch}_max-{max_version}_{fingerprint(environment)}.toml"


def probe_outcomes(report: Report, known_probes: Iterable[str]) -> dict[str, ProbeOutcome]:
    """The outcome of every catalog probe that ran to an end on the stack as it is (skipped and interrupted
    runs say nothing; a run carried on with a patch applied tells what the patch makes work, not the stack)."""
    known = set(known_probes)
    date = report.created[:10]
    return {
        r.id: ProbeOutcome(r.outcome, date, report.doctor_version, r.signal)
        for r in report.results
        if r.outcome.says_something and r.id in known and DetailKey.PATCHES_APPLIED not in r.details
    }


def row_from_report(report: Report, known_probes: Iterable[str], note: str | None = None) -> Row:
    """The row a report gives: every catalog probe that ran to an end, and the report's id."""
    results = probe_outcomes(report, known_probes)
    if not results:
        raise GpuDoctorError("the report has no probe results to record", hint="run the probes (not --no-probes)")
    row = Row(
        environment_key(report),
        results,
        report.doctor_version,
        report.created[:10],
        redact_text(note) if note else None,  # "see ~/runs/x" rather than the real home, whatever it is
        reports=(report_id(report),),
    )
    parse_row(Path(row.file_name), tomllib.loads(row.to_toml()))  # the same checks as a file (a note with a path)
    return row


def merge(old: Row, new: Row) -> Row:
    """The same environment again: the latest outcome per probe; ``agreeing`` counts the runs in a row that
    gave it, ``runs`` all runs. A report already merged into ``old`` changes nothing."""
    fresh = [r for r in new.reports if r not in old.reports]
    if new.reports and not fresh:
        return old
    results = dict(old.results)
    for probe, outcome in new.results.items():
        before = old.results.get(probe)
        if before is None:
            results[probe] = outcome
            continue
        same = (before.outcome, before.signal) == (outcome.outcome, outcome.signal)
        results[probe] = replace(outcome, runs=before.runs + 1, agreeing=before.agreeing + 1 if same else 1)
    return Row(
        old.environment,
        results,
        new.doctor_version,
        max(old.updated, new.updated),
        new.note or old.note,
        reports=(*old.reports, *fresh)[-MAX_REPORTS:],
    )


# --- reading and checking ----------------------------------------------------------------------------


def _where(path: Path, key: str) -> str:
    return f"{path}: field '{key}'" if key else str(path)


def _text(path: Path, key: str, value: Any, limit: int = MAX_TEXT) -> str:
    text = plain_string(_where(path, key), value, limit, MatrixError)
    for pattern, what in _PRIVATE:
        if pattern.search(text):
            raise MatrixError(f"{_where(path, key)}: looks like {what}; rows must not carry private data")
    return text


def _date(path: Path, key: str, value: Any) -> str:
    text = _text(path, key, value)
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise MatrixError(f"{_where(path, key)}: not a date like 2026-11-22: {text!r}") from None
    return text


def _env_value(path: Path, key: str, value: Any) -> str | int:
    where = f"environment.{key}"
    kind = ENV_FIELDS[key][1]
    if kind == "count":
        return whole_number(_where(path, where), value, 0, 1024, MatrixError)
    text = _text(path, where, value)
    if kind == "version":
        try:
            Version(text)
        except InvalidVersion:
            raise MatrixError(f"{_where(path, where)}: not a version: {text!r}") from None
    elif kind in _KINDS:
        pattern, description = _KINDS[kind]
        if not pattern.match(text):
            raise MatrixError(f"{_where(path, where)}: must be {description}, not {text!r}")
    return text


def _result(path: Path, probe: str, value: Any, known: set[str] | None) -> ProbeOutcome:
    where = f"results.{probe}"
    if known is not None and probe not in known:
        raise MatrixError(f"{_where(path, where)}: unknown probe id {probe!r} (known: {', '.join(sorted(known))})")
    table = checked_table(_where(path, where), value, _RESULT_FIELDS, MatrixError)
    try:
        outcome = Outcome(table.get("outcome"))
        if not outcome.says_something:
            raise ValueError(outcome)
    except ValueError:
        allowed = ", ".join(o.value for o in RECORDED_OUTCOMES)
        raise MatrixError(f"{_where(path, where + '.outcome')}: must be one of {allowed}") from None
    signal = table.get("signal")
    if signal is not None and (not isinstance(signal, str) or not re.match(r"^SIG[A-Z0-9]{2,10}$", signal)):
        raise MatrixError(f"{_where(path, where + '.signal')}: must be a signal name like SIGSEGV, not {signal!r}")
    if signal is not None and outcome is not Outcome.CRASH:
        raise MatrixError(f"{_where(path, where + '.signal')}: only a crash has a signal (outcome is {outcome.value})")
    runs = whole_number(_where(path, where + ".runs"), table.get("runs", 1), 1, 10**9, MatrixError)
    agreeing = whole_number(_where(path, where + ".agreeing"), table.get("agreeing", 1), 1, 10**9, MatrixError)
    if agreeing > runs:
        raise MatrixError(f"{_where(path, where + '.agreeing')}: cannot exceed runs")
    return ProbeOutcome(
        outcome=outcome,
        date=_date(path, f"{where}.date", table.get("date")),
        doctor=_text(path, f"{where}.doctor", table.get("doctor")),
        signal=signal,
        runs=runs,
        agreeing=agreeing,
    )


def _reports(path: Path, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(r, str) and _REPORT_ID.match(r) for r in value):
        raise MatrixError(f"{_where(path, 'reports')}: must be a list of report ids (16 hex digits)")
    if len(value) > MAX_REPORTS:
        raise MatrixError(f"{_where(path, 'reports')}: more than {MAX_REPORTS} ids")
    return tuple(value)


def parse_row(path: Path, data: Any, known_probes: set[str] | None = None) -> Row:
    """A row from parsed TOML; the first problem raises MatrixError naming the file and the field."""
    if not isinstance(data, dict):
        raise MatrixError(f"{path}: not a table")
    for key in data:
        if key not in _TOP_FIELDS:
            raise MatrixError(f"{_where(path, key)}: unknown field (allowed: {', '.join(sorted(_TOP_FIELDS))})")
    for key in ("schema", "doctor_version", "updated", "environment", "results"):
        if key not in data:
            raise MatrixError(f"{_where(path, key)}: missing")
    if data["schema"] not in READ_SCHEMAS or isinstance(data["schema"], bool):
        readable = " and ".join(str(s) for s in READ_SCHEMAS)
        raise MatrixError(f"{_where(path, 'schema')}: this gpudoctor reads schema {readable}, not {data['schema']!r}")
    environment = data["environment"]
    if not isinstance(environment, dict):
        raise MatrixError(f"{_where(path, 'environment')}: must be a table")
    for key in environment:
        if key not in ENV_FIELDS:
            raise MatrixError(f"{_where(path, 'environment.' + key)}: unknown field (allowed: {', '.join(ENV_FIELDS)})")
    env: dict[str, str | int] = {}
    for key, (required, _) in ENV_FIELDS.items():
        if key in environment:
            env[key] = _env_value(path, key, environment[key])
        elif required:
            raise MatrixError(f"{_where(path, 'environment.' + key)}: missing")
    results = data["results"]
    if not isinstance(results, dict) or not results:
        raise MatrixError(f"{_where(path, 'results')}: must be a table with at least one probe")
    note = data.get("note")
    return Row(
        environment=env,
        results={probe: _result(path, probe, value, known_probes) for probe, value in results.items()},
        doctor_version=_text(path, "doctor_version", data["doctor_version"]),
        updated=_date(path, "updated", data["updated"]),
        note=_text(path, "note", note, MAX_NOTE) if note is not None else None,
        reports=_reports(path, data.get("reports", [])),
        path=path,
    )


def load_row(path: Path, known_probes: set[str] | None = None, strict_name: bool = True) -> Row:
    """One row file, bounded and validated; its name must be its fingerprint's unless ``strict_name`` is off."""
    data = read_toml(path, MAX_ROW_BYTES, MatrixError)
    row = parse_row(path, data, known_probes)
    if strict_name and path.name != row.file_name:
        raise MatrixError(f"{path}: file name should be {row.file_name} (from its environment's fingerprint)")
    return row
