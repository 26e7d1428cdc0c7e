"""The probe catalog: which probe scripts exist, on which devices, needing what, after what.

Read from ``catalog.toml`` beside the scripts; a malformed entry is an error naming file, entry and field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Device, ProbeSpec
from gpudoctor.tomlcheck import checked_table, read_toml, string_list, whole_number

CATALOG_FILE = "catalog.toml"
MAX_CATALOG_BYTES = 256 * 1024
MAX_TIMEOUT_S = 24 * 3600.0  # a probe that needs more than a day is not a probe
_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_FIELDS = {"id", "script", "title", "stage", "devices", "needs", "after", "timeout_s", "args", "details", "subject"}
SUITE = "suite"  # the probes `gpudoctor` runs
KERNEL = "kernel"  # the probe `gpudoctor kernel` runs on the user's package
SUBJECTS = (SUITE, KERNEL)


def default_probe_dir() -> Path:
    """The probes shipped in the wheel, or the checkout's ``probes/`` when running from source."""
    package = Path(__file__).resolve().parents[1]  # src/gpudoctor, or the installed package
    for candidate in (package / "_data" / "probes", package.parents[1] / "probes"):
        if (candidate / CATALOG_FILE).is_file():
            return candidate
    raise GpuDoctorError("gpudoctor's probes are missing from this installation", hint="reinstall gpudoctor")


def run_ids(specs: Iterable[ProbeSpec]) -> set[str]:
    """Every run id the specs give: ``torch-env/cpu``, ``torch-env/cuda``, ``max-import``, ..."""
    return {spec.run_id(device) for spec in specs for device in spec.devices}


def default_kernel_dir() -> Path:
    package = Path(__file__).resolve().parents[1]  # src/gpudoctor, or the installed package
    for candidate in (package / "_data" / "kernels", package.parents[1] / "kernels"):
        if candidate.is_dir():
            return candidate
    raise GpuDoctorError("gpudoctor's kernels are missing from this installation", hint="reinstall gpudoctor")


def _script(where: str, script: str, probe_dir: Path) -> str:
    """The script path, which must name a regular file inside the probe folder."""
    relative = Path(script)
    if relative.is_absolute() or ".." in relative.parts:
        raise GpuDoctorError(f"{where}: field 'script' must be a path inside the probe folder, not {script!r}")
    path = probe_dir / relative
    if not path.exists():
        raise GpuDoctorError(f"{where}: field 'script' names {script!r}, which does not exist")
    if not path.is_file():
        raise GpuDoctorError(f"{where}: field 'script' names {script!r}, which is not a file")
    return script


def _subject(where: str, entry: Any) -> str:
    entry = checked_table(where, entry, _FIELDS)
    subject = entry.get("subject", SUITE)
    if subject not in SUBJECTS:
        raise GpuDoctorError(f"{where}: field 'subject' must be one of {', '.join(map(repr, SUBJECTS))}")
    return str(subject)


def _spec(where: str, entry: Any, probe_dir: Path) -> ProbeSpec:
    entry = checked_table(where, entry, _FIELDS)
    for key in ("id", "script", "title"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise GpuDoctorError(f"{where}: field {key!r} must be a non-empty string")
    if not _ID.fullmatch(entry["id"]):
        raise GpuDoctorError(f"{where}: field 'id' must be lower-case letters, digits, '.', '_' or '-' (at most 64)")
    where = f"{where} ({entry['id']})"
    script = _script(where, entry["script"], probe_dir)
    try:
        devices = tuple(Device(d) for d in string_list(where, entry, "devices")) or (Device.NONE,)
    except ValueError as error:
        raise GpuDoctorError(f"{where}: field 'devices': {error}") from error
    stage = whole_number(f"{where}: field 'stage'", entry.get("stage", 0), 0, 99)
    timeout = entry.get("timeout_s", 300)
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not math.isfinite(timeout)
        or not 0 < timeout <= MAX_TIMEOUT_S
    ):
        raise GpuDoctorError(f"{where}: field 'timeout_s' must be seconds, above 0 and at most {MAX_TIMEOUT_S:g}")
    return ProbeSpec(
        id=entry["id"],
        script=script,
        title=entry["title"],
        stage=stage,
        devices=devices,
        needs_packages=string_list(where, entry, "needs"),
        after=string_list(where, entry, "after"),
        timeout_s=float(timeout),
        args=string_list(where, entry, "args"),
        details=string_list(where, entry, "details"),
    )


def load_catalog(probe_dir: Path, subject: str = SUITE) -> tuple[ProbeSpec, ...]:
    """Every probe declared in ``probe_dir/catalog.toml`` for ``subject`` (default: the suite), validated."""
    if not probe_dir.is_dir():
        problem = "does not exist" if not probe_dir.exists() else "is not a folder"
        raise GpuDoctorError(f"{probe_dir}: {problem}", hint="point --probes at a folder holding catalog.toml")
    path = probe_dir / CATALOG_FILE
    if not path.exists():
        raise GpuDoctorError(f"{path}: no probe catalog here", hint="point --probes at a probe folder")
    data = read_toml(path, MAX_CATALOG_BYTES)
    entries = data.get("probe", [])
    if not isinstance(entries, list):
        raise GpuDoctorError(f"{path}: 'probe' must be an array of tables ([[probe]])")
    wheres = [f"{path}: probe #{n + 1}" for n in range(len(entries))]
    specs = tuple(_spec(where, entry, probe_dir) for where, entry in zip(wheres, entries, strict=True))
    subjects = [_subject(where, entry) for where, entry in zip(wheres, entries, strict=True)]
    ids = [s.id for s in specs]
    for spec in specs:
        if ids.count(spec.id) > 1:
            raise GpuDoctorError(f"{path}: probe id {spec.id!r} is declared twice")
        for prerequisite in spec.after:
            if prerequisite not in ids:
                raise GpuDoctorError(f"{path}: probe {spec.id!r}: field 'after' names unknown probe {prerequisite!r}")
    return tuple(spec for spec, of in zip(specs, subjects, strict=True) if of == subject)
