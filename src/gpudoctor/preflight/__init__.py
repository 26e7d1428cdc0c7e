"""Pre-flight checks: what the inventory alone shows is wrong, before any probe runs and without CUDA.

Functions of an Environment (and, for LD_LIBRARY_PATH, of the folders that variable names: the variable the
probes inherit); their rules (texts, library names, package pairs) are data in rules.toml, validated like
known_issues.toml and read once per process. Their findings appear with the inventory in every face.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Environment, Finding
from gpudoctor.preflight.building import (
    arch_list_invalid,
    extension_cuda_mismatch,
    extension_tools_missing,
    host_compiler_too_new,
    package_libraries,
    runtime_compiler_newer_major,
    runtime_compiler_newer_minor,
    triton_ptxas_vs_gpu,
)
from gpudoctor.preflight.rule import Found, Rule, parse_version
from gpudoctor.suite.bytecode import NO_BYTECODE_ENV, bytecode_turned_off
from gpudoctor.tomlcheck import checked_table, read_toml, string_list

RULES = Path(__file__).with_name("rules.toml")
_FIELDS = {
    "id", "check", "severity", "title", "explanation", "fix", "references", "libraries", "same_version", "same_major",
    "table",
}  # fmt: skip
# The keys each check reads from its rule's [[rule.table]] rows (all strings, `archs` a list of strings).
_TABLE_KEYS: Mapping[str, set[str]] = {
    "driver_floor": {"package", "versions", "driver", "cuda", "source"},
    "torch_arch_list": {"torch", "cuda", "archs", "source"},
    "toolchain_min_capability": {"package", "versions", "capability", "source"},
    "package_libraries": {"package", "library", "why"},
    "triton_ptxas_vs_gpu": {"capability_min", "capability_max", "cuda_min", "cuda_max", "source"},
    "runtime_compiler_newer_major": {"compiler", "package", "use"},
    "runtime_compiler_newer_minor": {"compiler", "package", "use"},
}




def torch_cuda_vs_driver(environment: Environment, rule: Rule) -> Found | None:
    torch_cuda = environment.stack.torch_cuda
    driver_cuda = environment.driver.cuda_driver_version
    built, supported = parse_version(str(torch_cuda) if torch_cuda else None), parse_version(driver_cuda)
    if built is None or supported is None or not environment.driver.available:
        return None
    if built.release[:2] <= supported.release[:2]:
        return None
    driver = environment.driver.version or "?"
    values = {"torch_cuda": str(torch_cuda), "driver_cuda": str(driver_cuda), "driver": driver}
    evidence = [f"torch/version.py: cuda = {torch_cuda!r}; NVML: driver {values['driver']}, CUDA {driver_cuda}"]
    return values, evidence


def shadowing_libraries(environment: Environment, rule: Rule) -> Found | None:
    """Files of the rule's libraries in LD_LIBRARY_PATH's folders (the real variable, read at inventory time)."""
    libraries = tuple(rule.data.get("libraries", ()))
    found: list[str] = []
    for folder in filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        found += [os.path.join(folder, n) for n in names if any(n.startswith(lib) for lib in libraries)]
    if not found:
        return None
    from gpudoctor.redact import redact_text

    shown = [redact_text(path) for path in found]
    files = ", ".join(sorted({os.path.basename(p) for p in shown})[:4])
    return {"files": files, "where": "; ".join(shown[:6])}, [f"LD_LIBRARY_PATH holds {path}" for path in shown[:6]]


def shadowed_modules(environment: Environment, rule: Rule) -> Found | None:
    """Names that resolve, before site-packages, to files no distribution installed (the inventory says which)."""
    modules: Mapping[str, Any] = environment.stack.modules or {}
    shadowed = [(name, str(modules.get(name))) for name in environment.stack.shadowing or ()]
    if not shadowed:
        return None
    names = ", ".join(name for name, _ in shadowed)
    where = "; ".join(f"`import {n}` finds {w}" for n, w in shadowed)
    return {"names": names, "where": where}, [f"import {n} resolves to {w}, outside site-packages" for n, w in shadowed]


def mixed_generations(environment: Environment, rule: Rule) -> Found | None:
    packages = environment.packages
    pairs = []
    for a, b in rule.data.get("same_version", ()):
        va, vb = parse_version(packages.get(a)), parse_version(packages.get(b))
        if va is not None and vb is not None and va.release != vb.release:
            pairs.append(f"{a} {packages[a]} with {b} {packages[b]}")
    for a, b in rule.data.get("same_major", ()):
        va, vb = parse_version(packages.get(a)), parse_version(packages.get(b))
        if va is not None and vb is not None and va.major != vb.major:
            pairs.append(f"{a} {packages[a]} with {b} {packages[b]}")
    if not pairs:
        return None
    return {"pairs": "; ".join(pairs), "max": str(packages.get("max") or "X")}, pairs


def requirements_unmet(environment: Environment, rule: Rule) -> Found | None:
    """Requirements installed distributions declare that the installed ones do not meet (read by the inventory from
    the examined interpreter's metadata, as pip check reads them)."""
    unmet = environment.stack.requirements_unmet
    if not unmet:
        return None
    lines = []
    for entry in unmet:
        have, wanted = entry.installed, entry.requirement
        what = "which is not installed" if have is None else f"but {entry.needs} {have} is installed"
        lines.append(f"{entry.package} {entry.version} requires {wanted}, {what}")
    return {"pairs": "; ".join(lines[:3]) + (f"; and {len(lines) - 3} more" if len(lines) > 3 else ""),
            "requirement": unmet[0].requirement}, lines  # fmt: skip


def device_nodes(environment: Environment, rule: Rule) -> Found | None:
    """A driver NVML answers for, but the device nodes CUDA opens absent or closed to this user."""
    nodes = environment.stack.device_nodes
    if not environment.driver.available or not environment.driver.gpus or nodes is None:
        return None
    present, closed = set(nodes.present), list(nodes.inaccessible)
    missing = [n for n in ("nvidiactl", "nvidia-uvm") if n not in present]
    if not any(n.removeprefix("nvidia").isdigit() for n in present):
        missing.append("nvidia0 (a node per GPU)")
    if not missing and not closed:
        return None
    lines = [f"/dev/{n} is missing" for n in missing] + [f"/dev/{n} cannot be opened by this user" for n in closed]
    return {"nodes": ", ".join(f"/dev/{n}" for n in (missing + closed))}, lines


def driver_vs_library(environment: Environment, rule: Rule) -> Found | None:
    """The loaded kernel module and the user-space NVML library must be one driver release."""
    module, library = environment.stack.kernel_module, environment.stack.nvml_library
    status = environment.driver.status
    if "mismatch" in status.lower():
        evidence = [f"NVML: {status}"]
        evidence += [f"/proc/driver/nvidia/version: kernel module {module}"] if module else []
        evidence += [f"user-space library: libnvidia-ml.so.{library}"] if library else []
        return {"module": str(module or "?"), "library": str(library or "?")}, evidence
    if module and library and str(module) != str(library):
        evidence = [f"/proc/driver/nvidia/version: kernel module {module}", f"loaded: libnvidia-ml.so.{library}"]
        return {"module": str(module), "library": str(library)}, evidence
    return None


def _contains(versions: str, version: str | None) -> bool:
    parsed = parse_version(version)
    try:
        return parsed is not None and SpecifierSet(versions).contains(parsed, prereleases=True)
    except InvalidSpecifier:
        return False


def driver_floor(environment: Environment, rule: Rule) -> Found | None:
    """A package release that needs a newer driver than this one (the rule's table: package, versions, driver)."""
    driver = parse_version(environment.driver.version)
    if driver is None:
        return None
    for row in rule.data.get("table", ()):
        installed = environment.packages.get(row["package"])
        floor = parse_version(row["driver"])
        if floor is None or not _contains(row["versions"], installed) or driver.release[:1] >= floor.release[:1]:
            continue
        values = {
            "package": row["package"], "installed": str(installed), "floor": row["driver"],
            "cuda": row.get("cuda", "?"), "driver": str(environment.driver.version),
        }  # fmt: skip
        evidence = [
            f"{row['package']} {installed} ({row['versions']}) needs driver >= {row['driver']}: {row['source']}",
            f"NVML: driver {environment.driver.version}",
        ]
        return values, evidence
    return None


def _sm(capability: str) -> tuple[int, int] | None:
    parts = capability.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def _runs_on(archs: Sequence[str], capability: tuple[int, int]) -> bool:
    """Whether code built for ``archs`` (sm_80, ...) runs on a GPU of ``capability``: same major, minor not
    above the GPU's (SASS is compatible within a major version)."""
    for arch in archs:
        digits = arch.removeprefix("sm_").rstrip("a")
        if digits.isdigit() and len(digits) >= 2:
            major, minor = int(digits[:-1]), int(digits[-1])
            if major == capability[0] and minor <= capability[1]:
                return True
    return False


def torch_arch_list(environment: Environment, rule: Rule) -> Found | None:
    """A GPU whose architecture the installed torch build has no kernels for (the rule's table of arch lists,
    each recorded from torch._C._cuda_getArchFlags() of a real wheel or stated by PyTorch)."""
    torch, torch_cuda = environment.packages.get("torch"), environment.stack.torch_cuda
    if not torch or not torch_cuda:
        return None
    row = next(
        (r for r in rule.data.get("table", ()) if _contains(r["torch"], torch) and r["cuda"] == str(torch_cuda)),
        None,
    )
    if row is None:
        return None
    for gpu in environment.driver.gpus:
        capability = _sm(gpu.compute_capability or "")
        if capability is None or _runs_on(row["archs"], capability):
            continue
        sm = f"sm_{capability[0]}{capability[1]}"
        values = {"gpu": gpu.name or f"GPU {gpu.index}", "sm": sm, "torch": str(torch), "archs": " ".join(row["archs"])}
        evidence = [
            f"NVML: {values['gpu']} has compute capability {gpu.compute_capability} ({sm})",
            f"torch {torch} (CUDA {torch_cuda}) carries kernels for {values['archs']} ({row['source']})",
        ]
        return values, evidence
    return None


def toolchain_min_capability(environment: Environment, rule: Rule) -> Found | None:
    """A GPU older than what the installed MAX's Mojo toolchain can still compile for."""
    for row in rule.data.get("table", ()):
        installed = environment.packages.get(row["package"])
        least = _sm(row["capability"])
        if least is None or not _contains(row["versions"], installed):
            continue
        for gpu in environment.driver.gpus:
            capability = _sm(gpu.compute_capability or "")
            if capability is None or capability >= least:
                continue
            values = {
                "gpu": gpu.name or f"GPU {gpu.index}", "sm": f"sm_{capability[0]}{capability[1]}",
                "package": row["package"], "installed": str(installed), "least": row["capability"],
            }  # fmt: skip
            evidence = [
                f"NVML: {values['gpu']} has compute capability {gpu.compute_capability}",
                f"{row['package']} {installed} ({row['versions']}) compiles for {row['capability']} and newer: "
                f"{row['source']}",
            ]
            return values, evidence
    return None


def bytecode_off(environment: Environment, rule: Rule) -> Found | None:
    """PYTHONDONTWRITEBYTECODE set, no PYTHONPYCACHEPREFIX, and packages installed without their bytecode."""
    env = environment.env_vars
    missing = [str(name) for name in environment.stack.no_bytecode or ()]
    if not bytecode_turned_off(env) or not missing:
        return None
    names = " and ".join(missing)
    evidence = [f"{NO_BYTECODE_ENV}={env[NO_BYTECODE_ENV]}; no __pycache__ bytecode beside {names}"]
    return {"names": names}, evidence


CHECKS: Mapping[str, Callable[[Environment, Rule], Found | None]] = {
    "bytecode_off": bytecode_off,
    "driver_vs_library": driver_vs_library,
    "driver_floor": driver_floor,
    "torch_arch_list": torch_arch_list,
    "toolchain_min_capability": toolchain_min_capability,
    "torch_cuda_vs_driver": torch_cuda_vs_driver,
    "shadowing_libraries": shadowing_libraries,
    "shadowed_modules": shadowed_modules,
    "mixed_generations": mixed_generations,
    "requirements_unmet": requirements_unmet,
    "device_nodes": device_nodes,
    "package_libraries": package_libraries,
    "extension_cuda_mismatch": extension_cuda_mismatch,
    "host_compiler_too_new": host_compiler_too_new,
    "arch_list_invalid": arch_list_invalid,
    "extension_tools_missing": extension_tools_missing,
    "triton_ptxas_vs_gpu": triton_ptxas_vs_gpu,
    "runtime_compiler_newer_major": runtime_compiler_newer_major,
    "runtime_compiler_newer_minor": runtime_compiler_newer_minor,
}


def _pair_list(where: str, value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value
    ):
        raise GpuDoctorError(f"{where}: must be a list of [name, name] pairs")
    return tuple((p[0], p[1]) for p in value)


def _table(where: str, check: str, rows: Any) -> tuple[dict[str, Any], ...]:
    """A check's [[rule.table]] rows: every key it reads present, strings (``archs`` a list of strings)."""
    keys = _TABLE_KEYS.get(check, set())
    if not isinstance(rows, list) or (rows and not keys):
        raise GpuDoctorError(f"{where}: field 'table' must be a list of tables, and only for checks that read one")
    out = []
    for n, raw in enumerate(rows):
        here = f"{where}: table row #{n + 1}"
        row = checked_table(here, raw, keys)
        for key in sorted(keys - {"cuda"} if check == "driver_floor" else keys):
            value = row.get(key)
            ok = (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
                if key == "archs"
                else isinstance(value, str)
            )
            if not ok:
                raise GpuDoctorError(
                    f"{here}: field {key!r} must be {'a list of strings' if key == 'archs' else 'a string'}"
                )
        for key in ("versions", "torch"):
            if key in row:
                try:
                    SpecifierSet(row[key])
                except InvalidSpecifier:
                    raise GpuDoctorError(f"{here}: field {key!r} is not a version specifier") from None
        out.append(dict(row))
    return tuple(out)


def load_rules(path: Path = RULES) -> tuple[Rule, ...]:
    data = read_toml(path, 256 * 1024)
    entries = data.get("rule", [])
    if not isinstance(entries, list):
        raise GpuDoctorError(f"{path}: 'rule' must be an array of tables ([[rule]])")
    rules = []
    for n, raw in enumerate(entries):
        where = f"{path}: rule #{n + 1}"
        entry = checked_table(where, raw, _FIELDS)
        for key in ("id", "check", "severity", "title", "explanation", "fix"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise GpuDoctorError(f"{where}: field {key!r} must be a non-empty string")
        if entry["check"] not in CHECKS:
            raise GpuDoctorError(f"{where}: field 'check' names unknown check {entry['check']!r}")
        if entry["severity"] not in ("problem", "notice"):
            raise GpuDoctorError(f"{where}: field 'severity' must be problem or notice")
        extra: dict[str, Any] = {"libraries": string_list(where, entry, "libraries")}
        for key in ("same_version", "same_major"):
            extra[key] = _pair_list(f"{where}: field {key!r}", entry.get(key, []))
        extra["table"] = _table(where, entry["check"], entry.get("table", []))
        rules.append(
            Rule(
                id=entry["id"],
                check=entry["check"],
                severity=entry["severity"],
                title=entry["title"],
                explanation=entry["explanation"],
                fix=entry["fix"],
                references=string_list(where, entry, "references"),
                data=extra,
            )
        )
    return tuple(rules)


@functools.cache
def _shipped_rules() -> tuple[Rule, ...]:
    return load_rules()


def preflight(environment: Environment, rules: Sequence[Rule] | None = None) -> tuple[Finding, ...]:
    """Every pre-flight finding for this environment, in rule order."""
    findings = []
    for rule in rules if rules is not None else _shipped_rules():
        found = CHECKS[rule.check](environment, rule)
        if found is None:
            continue
        values, evidence = found
        findings.append(
            Finding(
                id=rule.id,
                title=rule.title.format_map(_Blank(values)),
                evidence=tuple(evidence),
                explanation=rule.explanation.format_map(_Blank(values)),
                fix=rule.fix.format_map(_Blank(values)),
                severity=rule.severity,
                references=rule.references,
            )
        )
    return tuple(findings)


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"
