"""The probe catalog: which probe scripts exist, on which devices, needing what, after what.

Read from ``catalog.toml`` beside the scripts; a malformed entry is an error naming file, entry and field.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import tomllib

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Device, ProbeSpec
from gpudoctor.tomlcheck import checked_table, string_list

CATALOG_FILE = "catalog.toml"
_FIELDS = {"id", "script", "title", "stage", "devices", "needs", "after", "timeout_s", "args", "details"}


def default_probe_dir() -> Path:
    """The probes shipped in the wheel, or the checkout's ``probes/`` when running from source."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_data" / "probes", package.parents[1] / "probes"):
        if (candidate / CATALOG_FILE).is_file():
            return candidate
    raise GpuDoctorError("gpudoctor's probes are missing from this installation", hint="reinstall gpudoctor")


def run_ids(specs: Iterable[ProbeSpec]) -> set[str]:
    """Every run id the specs give: ``torch-env/cpu``, ``torch-env/cuda``, ``max-import``, ..."""
    return {spec.run_id(device) for spec in specs for device in spec.devices}


def default_kernel_dir() -> Path:
    package = Path(__file__).resolve().parent
    for candidate in (package / "_data" / "kernels", package.parents[1] / "kernels"):
        if candidate.is_dir():
            return candidate
    raise GpuDoctorError("gpudoctor's kernels are missing from this installation", hint="reinstall gpudoctor")


def _spec(where: str, entry: Any, probe_dir: Path) -> ProbeSpec:
    entry = checked_table(where, entry, _FIELDS)
    for key in ("id", "script", "title"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise GpuDoctorError(f"{where}: field {key!r} must be a non-empty string")
    where = f"{where} ({entry['id']})"
    if not (probe_dir / entry["script"]).is_file():
        raise GpuDoctorError(f"{where}: field 'script' names {entry['script']!r}, which does not exist")
    try:
        devices = tuple(Device(d) for d in string_list(where, entry, "devices")) or (Device.NONE,)
    except ValueError as error:
        raise GpuDoctorError(f"{where}: field 'devices': {error}") from error
    stage = entry.get("stage", 0)
    timeout = entry.get("timeout_s", 300)
    if not isinstance(stage, int) or isinstance(stage, bool):
        raise GpuDoctorError(f"{where}: field 'stage' must be an integer")
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise GpuDoctorError(f"{where}: field 'timeout_s' must be a positive number")
    return ProbeSpec(
        id=entry["id"],
        script=entry["script"],
        title=entry["title"],
        stage=stage,
        devices=devices,
        needs_packages=string_list(where, entry, "needs"),
        after=string_list(where, entry, "after"),
        timeout_s=float(timeout),
        args=string_list(where, entry, "args"),
        details=string_list(where, entry, "details"),
    )


def load_catalog(probe_dir: Path) -> tuple[ProbeSpec, ...]:
    """Every probe declared in ``probe_dir/catalog.toml``, validated."""
    path = probe_dir / CATALOG_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise GpuDoctorError(f"{path}: no probe catalog here", hint="point --probes at a probe folder") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise GpuDoctorError(f"{path}: not valid TOML: {error}") from error
    entries = data.get("probe", [])
    if not isinstance(entries, list):
        raise GpuDoctorError(f"{path}: 'probe' must be an array of tables ([[probe]])")
    specs = tuple(_spec(f"{path}: probe #{n + 1}", entry, probe_dir) for n, entry in enumerate(entries))
    ids = [s.id for s in specs]
    for spec in specs:
        if ids.count(spec.id) > 1:
            raise GpuDoctorError(f"{path}: probe id {spec.id!r} is declared twice")
        for prerequisite in spec.after:
            if prerequisite not in ids:
                raise GpuDoctorError(f"{path}: probe {spec.id!r}: field 'after' names unknown probe {prerequisite!r}")
    return specs
