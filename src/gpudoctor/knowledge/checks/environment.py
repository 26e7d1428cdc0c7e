"""Environment checks (an entry's ``before`` clause): what the inventory alone shows is wrong, before any probe runs
and without CUDA — the driver, the packages, the GPUs, the variables and files the probes inherit.

Pure functions of an Environment (and, for LD_LIBRARY_PATH, of the folders that variable names: the variable the
probes inherit); their texts and data (library names, package pairs, table rows) are the entries' in knowledge/.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from gpudoctor.knowledge.checks.common import parse_version
from gpudoctor.knowledge.entry import Before
from gpudoctor.knowledge.registry import Found, check
from gpudoctor.model import Environment
from gpudoctor.suite.bytecode import NO_BYTECODE_ENV, bytecode_turned_off


@check("torch_cuda_vs_driver")
def torch_cuda_vs_driver(environment: Environment, rule: Before) -> Found | None:
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


@check("shadowing_libraries")
def shadowing_libraries(environment: Environment, rule: Before) -> Found | None:
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


@check("shadowed_modules")
def shadowed_modules(environment: Environment, rule: Before) -> Found | None:
    """Names that resolve, before site-packages, to files no distribution installed (the inventory says which)."""
    modules: Mapping[str, Any] = environment.stack.modules or {}
    shadowed = [(name, str(modules.get(name))) for name in environment.stack.shadowing or ()]
    if not shadowed:
        return None
    names = ", ".join(name for name, _ in shadowed)
    where = "; ".join(f"`import {n}` finds {w}" for n, w in shadowed)
    return {"names": names, "where": where}, [f"import {n} resolves to {w}, outside site-packages" for n, w in shadowed]


@check("mixed_generations")
def mixed_generations(environment: Environment, rule: Before) -> Found | None:
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


@check("requirements_unmet")
def requirements_unmet(environment: Environment, rule: Before) -> Found | None:
    """Requirements installed distributions declare that the installed ones do not meet (read by the inventory from
    the examined interpreter's metadata, as pip check reads them)."""
    unmet = environment.stack.requirements_unmet
    if not unmet:
        return None
    lines = [str(entry) for entry in unmet]
    return {"pairs": "; ".join(lines[:3]) + (f"; and {len(lines) - 3} more" if len(lines) > 3 else ""),
            "requirement": unmet[0].requirement}, lines  # fmt: skip


@check("device_nodes")
def device_nodes(environment: Environment, rule: Before) -> Found | None:
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


@check("driver_vs_library")
def driver_vs_library(environment: Environment, rule: Before) -> Found | None:
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


@check(
    "driver_floor", table=frozenset({"cuda", "driver", "package", "source", "versions"}), optional=frozenset({"cuda"})
)
def driver_floor(environment: Environment, rule: Before) -> Found | None:
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


@check("torch_arch_list", table=frozenset({"archs", "cuda", "source", "torch"}))
def torch_arch_list(environment: Environment, rule: Before) -> Found | None:
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


@check("toolchain_min_capability", table=frozenset({"capability", "package", "source", "versions"}))
def toolchain_min_capability(environment: Environment, rule: Before) -> Found | None:
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


@check("bytecode_off")
def bytecode_off(environment: Environment, rule: Before) -> Found | None:
    """PYTHONDONTWRITEBYTECODE set, no PYTHONPYCACHEPREFIX, and packages installed without their bytecode."""
    env = environment.env_vars
    missing = [str(name) for name in environment.stack.no_bytecode or ()]
    if not bytecode_turned_off(env) or not missing:
        return None
    names = " and ".join(missing)
    evidence = [f"{NO_BYTECODE_ENV}={env[NO_BYTECODE_ENV]}; no __pycache__ bytecode beside {names}"]
    return {"names": names}, evidence
