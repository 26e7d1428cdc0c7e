"""The shared compatibility matrix: one TOML file per environment under ``matrix/rows/``.

A row is an environment key (GPU, driver, CUDA, torch, MAX, Mojo, cuda-core, Python, OS) and the outcome
of every probe the doctor ran there. The file name carries a fingerprint of the key, so two people adding
rows for different environments never touch the same file, and the same environment again lands in the
same file with its results merged (latest outcome per probe, with how many runs agreed).

Rows are data from strangers: every field is checked (``gpudoctor matrix check``), nothing private is
accepted, and text is escaped wherever it is shown.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w
import tomllib
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from gpudoctor.atomic import PARTIAL_SUFFIX, atomic_write, sweep_partials
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Outcome, Report
from gpudoctor.render import CONTROL_CHARS, safe_text

ROW_SCHEMA = 1
MAX_ROW_BYTES = 64 * 1024
MAX_TEXT = 200  # characters in any string field but the note
MAX_NOTE = 1000
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
_TOP_FIELDS = {"schema", "doctor_version", "updated", "note", "environment", "results"}
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


class MatrixError(GpuDoctorError):
    """A row that breaks the schema; the message names the file and the field."""


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
        data["environment"] = {k: self.environment[k] for k in ENV_FIELDS if k in self.environment}
        data["results"] = {k: self.results[k].to_toml() for k in sorted(self.results)}
        return "# A gpudoctor compatibility-matrix row (schema 1): see matrix/README.md.\n" + tomli_w.dumps(data)


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
    torch_cuda = next((r.details.get("torch_cuda") for r in report.results if r.details.get("torch_cuda")), None)
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
    """The outcome of every catalog probe that ran (skipped runs say nothing about the stack)."""
    known = set(known_probes)
    date = report.created[:10]
    return {
        r.id: ProbeOutcome(r.outcome, date, report.doctor_version, r.signal)
        for r in report.results
        if r.outcome is not Outcome.SKIPPED and r.id in known
    }


def row_from_report(report: Report, known_probes: Iterable[str], note: str | None = None) -> Row:
    """The row a report gives: every catalog probe that ran (skipped runs say nothing about the stack)."""
    results = probe_outcomes(report, known_probes)
    if not results:
        raise GpuDoctorError("the report has no probe results to record", hint="run the probes (not --no-probes)")
    row = Row(environment_key(report), results, report.doctor_version, report.created[:10], note or None)
    _validate_row_values(Path(row.file_name), row)
    return row


def merge(old: Row, new: Row) -> Row:
    """The same environment again: the latest outcome per probe; ``agreeing`` counts the runs in a row that
    gave it, ``runs`` all runs."""
    results = dict(old.results)
    for probe, outcome in new.results.items():
        before = old.results.get(probe)
        if before is None:
            results[probe] = outcome
            continue
        same = (before.outcome, before.signal) == (outcome.outcome, outcome.signal)
        results[probe] = replace(outcome, runs=before.runs + 1, agreeing=before.agreeing + 1 if same else 1)
    return Row(old.environment, results, new.doctor_version, max(old.updated, new.updated), new.note or old.note)


# --- writing -----------------------------------------------------------------------------------------


def add_row(directory: Path, row: Row) -> tuple[Path, Row, bool]:
    """Write the row into ``directory/rows``, merged with the file already there; (path, row, was new)."""
    rows = directory / ROWS_DIR
    if rows.is_dir():
        sweep_partials(rows)
    path = rows / row.file_name
    existing = load_row(path, strict_name=False) if path.exists() else None
    merged = merge(existing, row) if existing else row
    atomic_write(path, merged.to_toml())
    return path, merged, existing is None


# --- reading and checking ----------------------------------------------------------------------------


def _fail(path: Path, where: str, message: str) -> MatrixError:
    return MatrixError(f"{path}: field '{where}': {message}" if where else f"{path}: {message}")


def _text(path: Path, where: str, value: Any, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise _fail(path, where, f"must be a string, not {type(value).__name__}")
    if not value.strip():
        raise _fail(path, where, "must not be empty")
    if len(value) > limit:
        raise _fail(path, where, f"longer than {limit} characters")
    if control := CONTROL_CHARS.search(value):
        raise _fail(path, where, f"contains a control character (\\x{ord(control.group()):02x}); rows are plain text")
    for pattern, what in _PRIVATE:
        if pattern.search(value):
            raise _fail(path, where, f"looks like {what}; rows must not carry private data")
    return value


def _date(path: Path, where: str, value: Any) -> str:
    text = _text(path, where, value)
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        raise _fail(path, where, f"not a date like 2026-11-22: {text!r}") from None
    return text


def _env_value(path: Path, key: str, value: Any) -> str | int:
    where = f"environment.{key}"
    kind = ENV_FIELDS[key][1]
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1024:
            raise _fail(path, where, "must be a whole number from 0 to 1024")
        return value
    text = _text(path, where, value)
    if kind == "version":
        try:
            Version(text)
        except InvalidVersion:
            raise _fail(path, where, f"not a version: {text!r}") from None
    elif kind in _KINDS:
        pattern, description = _KINDS[kind]
        if not pattern.match(text):
            raise _fail(path, where, f"must be {description}, not {text!r}")
    return text


def _result(path: Path, probe: str, value: Any, known: set[str] | None) -> ProbeOutcome:
    where = f"results.{probe}"
    if known is not None and probe not in known:
        raise _fail(path, where, f"unknown probe id {probe!r} (known: {', '.join(sorted(known))})")
    if not isinstance(value, dict):
        raise _fail(path, where, "must be a table")
    for key in value:
        if key not in _RESULT_FIELDS:
            raise _fail(path, f"{where}.{key}", f"unknown field (allowed: {', '.join(sorted(_RESULT_FIELDS))})")
    try:
        outcome = Outcome(value.get("outcome"))
    except ValueError:
        raise _fail(path, f"{where}.outcome", f"must be one of {', '.join(o.value for o in Outcome)}") from None
    signal = value.get("signal")
    if signal is not None and (not isinstance(signal, str) or not re.match(r"^SIG[A-Z0-9]{2,10}$", signal)):
        raise _fail(path, f"{where}.signal", f"must be a signal name like SIGSEGV, not {signal!r}")
    counts = {}
    for key in ("runs", "agreeing"):
        count = value.get(key, 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise _fail(path, f"{where}.{key}", "must be a whole number of at least 1")
        counts[key] = count
    if counts["agreeing"] > counts["runs"]:
        raise _fail(path, f"{where}.agreeing", "cannot exceed runs")
    return ProbeOutcome(
        outcome=outcome,
        date=_date(path, f"{where}.date", value.get("date")),
        doctor=_text(path, f"{where}.doctor", value.get("doctor")),
        signal=signal,
        runs=counts["runs"],
        agreeing=counts["agreeing"],
    )


def parse_row(path: Path, data: Any, known_probes: set[str] | None = None) -> Row:
    """A row from parsed TOML; the first problem raises MatrixError naming the file and the field."""
    if not isinstance(data, dict):
        raise _fail(path, "", "not a table")
    for key in data:
        if key not in _TOP_FIELDS:
            raise _fail(path, key, f"unknown field (allowed: {', '.join(sorted(_TOP_FIELDS))})")
    for key in ("schema", "doctor_version", "updated", "environment", "results"):
        if key not in data:
            raise _fail(path, key, "missing")
    if data["schema"] != ROW_SCHEMA or isinstance(data["schema"], bool):
        raise _fail(path, "schema", f"this gpudoctor reads schema {ROW_SCHEMA}, not {data['schema']!r}")
    environment = data["environment"]
    if not isinstance(environment, dict):
        raise _fail(path, "environment", "must be a table")
    for key in environment:
        if key not in ENV_FIELDS:
            raise _fail(path, f"environment.{key}", f"unknown field (allowed: {', '.join(ENV_FIELDS)})")
    env: dict[str, str | int] = {}
    for key, (required, _) in ENV_FIELDS.items():
        if key in environment:
            env[key] = _env_value(path, key, environment[key])
        elif required:
            raise _fail(path, f"environment.{key}", "missing")
    results = data["results"]
    if not isinstance(results, dict) or not results:
        raise _fail(path, "results", "must be a table with at least one probe")
    note = data.get("note")
    return Row(
        environment=env,
        results={probe: _result(path, probe, value, known_probes) for probe, value in results.items()},
        doctor_version=_text(path, "doctor_version", data["doctor_version"]),
        updated=_date(path, "updated", data["updated"]),
        note=_text(path, "note", note, MAX_NOTE) if note is not None else None,
        path=path,
    )


def _validate_row_values(path: Path, row: Row) -> None:
    """Run a row built in memory through the same checks as a file (a note with a home path, say)."""
    parse_row(path, tomllib.loads(row.to_toml()))


def load_row(path: Path, known_probes: set[str] | None = None, strict_name: bool = True) -> Row:
    try:
        if path.stat().st_size > MAX_ROW_BYTES:
            raise _fail(path, "", f"larger than {MAX_ROW_BYTES // 1024} KiB; a row is a few dozen lines")
        text = path.read_bytes().decode("utf-8")
    except OSError as error:
        raise _fail(path, "", f"cannot read: {error.strerror or error}") from error
    except UnicodeDecodeError:
        raise _fail(path, "", "not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise _fail(path, "", f"not valid TOML: {error}") from error
    row = parse_row(path, data, known_probes)
    if strict_name and path.name != row.file_name:
        raise _fail(path, "", f"file name should be {row.file_name} (from its environment's fingerprint)")
    return row


def row_files(directory: Path) -> list[Path]:
    rows = directory / ROWS_DIR
    return sorted(rows.glob("*.toml")) if rows.is_dir() else []


def check_matrix(directory: Path, known_probes: set[str] | None) -> tuple[list[Row], list[str]]:
    """Every row in the matrix, and one error line for each file that breaks the schema."""
    rows, errors = [], []
    if not (directory / ROWS_DIR).is_dir():
        return [], [f"{directory}: no {ROWS_DIR}/ folder"]
    for path in row_files(directory):
        try:
            rows.append(load_row(path, known_probes))
        except MatrixError as error:
            errors.append(str(error))
    for stray in sorted((directory / ROWS_DIR).iterdir()):
        if stray.is_file() and stray.suffix != ".toml" and not stray.name.endswith(PARTIAL_SUFFIX):
            errors.append(f"{stray}: not a .toml row")
    return rows, errors


def load_matrix(directory: Path, known_probes: set[str] | None = None) -> list[Row]:
    rows, errors = check_matrix(directory, known_probes)
    if errors:
        raise MatrixError(errors[0], hint=f"{len(errors)} bad row file(s); run `gpudoctor matrix check`")
    return rows


# --- reading the matrix: filters, nearest rows, what changed ----------------------------------------------


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


# --- matrix/README.md ---------------------------------------------------------------------------------

README_INTRO = """\
# The gpudoctor compatibility matrix

<!-- Generated by `gpudoctor matrix readme` from the rows in rows/; a test fails when it is stale. -->

Each file in `rows/` is one environment where `gpudoctor` ran its probes, and what every probe did there.
Every row comes from a real run. Add yours with `gpudoctor matrix add` (after a run, or `--from report.json`
for a saved `gpudoctor --json`), check with `gpudoctor matrix check`, and open a pull request with the new
or changed file. `gpudoctor matrix near` shows the rows closest to your environment and what differs.

## Row format (schema 1)

```toml
schema = 1
doctor_version = "0.1.0"          # the gpudoctor that recorded the latest results
updated = "2026-11-22"
note = "optional, plain text"

[environment]                      # the key; the file name carries its fingerprint
gpu = "NVIDIA H100 80GB HBM3"      # or "cpu" where the driver reports no GPU
compute_capability = "9.0"         # optional fields are left out when absent
gpu_count = 1
driver = "580.159.04"
cuda_driver = "13.0"               # the CUDA version the driver supports
torch = "2.11.0+cu130"
torch_cuda = "13.0"                # the CUDA torch was built for
max = "26.7.0"
mojo-compiler = "1.2.0"
cuda-core = "1.2.0"
python = "3.12.3"
os = "linux"
arch = "x86_64"

[results."custom-op/cuda"]         # a probe run id from probes/catalog.toml
outcome = "pass"                   # pass, fail, crash, timeout
signal = "SIGSEGV"                 # only for a crash
runs = 3                           # runs recorded for this probe here
agreeing = 3                       # how many of the latest runs in a row gave this outcome
date = "2026-11-22"
doctor = "0.1.0"
```

Nothing private goes in a row: no host or user names, paths, serials or UUIDs (`matrix check` rejects them).
"""


def _md(text: object) -> str:
    """A Markdown table cell: control characters visible, pipes and HTML escaped."""
    escaped = safe_text(str(text))
    for char, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("\n", " ")):
        escaped = escaped.replace(char, entity)
    return escaped


def outcome_summary(row: Row) -> tuple[str, str]:
    """("14 pass, 1 crash", "custom-op/cuda: crash (SIGSEGV)") for a row."""
    counts: dict[str, int] = {}
    for result in row.results.values():
        counts[result.outcome.value] = counts.get(result.outcome.value, 0) + 1
    summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items(), key=lambda kv: (kv[0] != "pass", kv[0])))
    problems = "; ".join(f"{p}: {r.label()}" for p, r in sorted(row.results.items()) if r.outcome.is_problem)
    return summary, problems or "none"


def readme_text(rows: Sequence[Row]) -> str:
    columns = ("gpu", "driver", "cuda_driver", "torch", "max", "mojo-compiler", "cuda-core", "python", "os")
    lines = [README_INTRO, f"## Rows ({len(rows)})", ""]
    lines.append("| " + " | ".join(columns) + " | outcomes | problems | updated | file |")
    lines.append("|" + " --- |" * (len(columns) + 4))
    for row in sorted(rows, key=lambda r: r.file_name):
        summary, problems = outcome_summary(row)
        cells = [_md(row.value(c)) for c in columns]
        cells += [_md(summary), _md(problems), _md(row.updated), f"[{_md(row.file_name)}](rows/{row.file_name})"]
        lines.append("| " + " | ".join(cells) + " |")
    found = transitions(rows)
    if found:
        lines += ["", "## What changing one thing did", ""]
        lines += [f"- {_md(t.sentence())}" for t in found]
    notes = [(r.file_name, r.note) for r in sorted(rows, key=lambda r: r.file_name) if r.note]
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- `{name}`: {_md(note)}" for name, note in notes]
    return "\n".join(lines).rstrip() + "\n"


# --- text for the terminal ----------------------------------------------------------------------------


def _plain(text: object) -> str:
    return safe_text(str(text))


def show_text(rows: Sequence[Row]) -> str:
    if not rows:
        return "no rows match\n"
    columns = ("gpu", "driver", "torch", "max", "python")
    table = [[*columns, "outcomes", "problems"]]
    for row in sorted(rows, key=lambda r: r.file_name):
        table.append([*(row.value(c) for c in columns), *outcome_summary(row)])
    widths = [max(len(_plain(line[i])) for line in table) for i in range(len(columns) + 1)]
    out = []
    for line in table:
        cells = [_plain(cell).ljust(widths[i]) if i < len(widths) else _plain(cell) for i, cell in enumerate(line)]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out) + "\n"


def near_text(report: Report, rows: Sequence[Row], known: Iterable[str], count: int = 5) -> str:
    """The nearest rows to the report's environment, what differs, and which outcomes changed."""
    here = environment_key(report)
    ran = probe_outcomes(report, known)
    own = Row(here, ran, report.doctor_version, report.created[:10]) if ran else None
    lines = ["this environment: " + ", ".join(f"{k} {_plain(v)}" for k, v in here.items())]
    neighbours = nearest(here, rows, own, count)
    if not neighbours:
        return lines[0] + "\nthe matrix has no rows\n"
    for n in neighbours:
        summary, problems = outcome_summary(n.row)
        same = (
            "same environment"
            if not n.differs
            else "differs: " + ", ".join(f"{k} {_plain(a)} → {_plain(b)}" for k, a, b in n.differs)
        )
        lines += [
            "",
            f"{n.row.file_name} (distance {n.distance})",
            f"  {same}",
            f"  {summary}; problems: {_plain(problems)}",
        ]
        lines += [f"  {probe}: here {a}, there {b}" for probe, a, b in n.changed]
    found = transitions([n.row for n in neighbours])
    if found:
        lines += ["", "what changing one thing did, among these rows:"]
        lines += [f"  {_plain(t.sentence())}" for t in found]
    return "\n".join(lines) + "\n"


def default_matrix_dir(given: Path | None, writing: bool) -> Path:
    """The matrix to use: --matrix, $GPUDOCTOR_MATRIX, ./matrix, the checkout's matrix/, or (to read) the
    copy shipped in the wheel."""
    if given is not None:
        return given
    if env := os.environ.get("GPUDOCTOR_MATRIX"):
        return Path(env)
    package = Path(__file__).resolve().parent
    candidates = [Path.cwd() / "matrix", package.parents[1] / "matrix"]
    if not writing:
        candidates.append(package / "_data" / "matrix")
    for candidate in candidates:
        if (candidate / ROWS_DIR).is_dir():
            return candidate
    raise GpuDoctorError(
        "no matrix folder found", hint="give --matrix DIR (the matrix/ folder of a gpudoctor checkout)"
    )
