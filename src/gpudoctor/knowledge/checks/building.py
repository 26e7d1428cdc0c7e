"""Environment checks of what building and loading GPU code needs: CUDA libraries the loader finds for the packages
installed (gpudoctor.facts.libraries), and the toolkit, host compiler, arch list and tools of torch.utils.cpp_extension
(gpudoctor.facts.buildtools). Pure functions of the inventory, like the other checks."""

from __future__ import annotations

from typing import Any

from gpudoctor.knowledge.checks.common import parse_version
from gpudoctor.knowledge.entry import Before
from gpudoctor.knowledge.registry import Found, check
from gpudoctor.model import Environment
from gpudoctor.stackfacts import BuildFacts


@check("package_libraries", table=frozenset({"library", "package", "why"}))
def package_libraries(environment: Environment, rule: Before) -> Found | None:
    """A package installed whose CUDA library (the rule's table: package, library) neither the dynamic loader nor
    pip's nvidia-* wheels provide; libcuda.so only where a driver is installed (without one, nothing needs it)."""
    libraries = environment.stack.libraries
    if libraries is None:
        return None
    lines, names = [], []
    for row in rule.data.get("table", ()):
        package, library = row["package"], row["library"]
        version = environment.packages.get(package)
        if not version or library in libraries:
            continue
        if library.startswith("libcuda.") and "libcuda.so.1" not in libraries:
            continue  # no driver library at all: the driver checks say so
        lines.append(f"{package} {version} needs {library}: the loader does not find it and no pip wheel has it")
        names.append(library)
    if not lines:
        return None
    return {"libraries": ", ".join(dict.fromkeys(names))}, lines


def _build(environment: Environment) -> BuildFacts:
    return environment.stack.build or BuildFacts()


def _release(text: Any) -> tuple[int, ...] | None:
    parsed = parse_version(text)
    return parsed.release if parsed is not None else None


def _major(text: Any) -> int | None:
    parsed = parse_version(text)
    return parsed.major if parsed is not None else None


@check("extension_cuda_mismatch")
def extension_cuda_mismatch(environment: Environment, rule: Before) -> Found | None:
    """nvcc's CUDA major release against the one torch was built for: cpp_extension refuses to build across them."""
    build, torch_cuda = _build(environment), environment.stack.torch_cuda
    nvcc_cuda = build.nvcc_cuda
    if not nvcc_cuda or not torch_cuda or _major(nvcc_cuda) == _major(torch_cuda):
        return None
    found = {"nvcc": str(build.nvcc), "nvcc_cuda": str(nvcc_cuda), "torch_cuda": str(torch_cuda)}
    return found, [f"{build.nvcc} is CUDA {nvcc_cuda} (CUDA_HOME {build.cuda_home}); torch.version.cuda "
                   f"is {torch_cuda}"]  # fmt: skip


@check("host_compiler_too_new")
def host_compiler_too_new(environment: Environment, rule: Before) -> Found | None:
    """A gcc newer than the toolkit's host_config.h accepts."""
    build = _build(environment)
    major, newest = build.host_compiler_major, build.newest_host_gcc
    if build.host_compiler not in ("gcc", "g++") or not isinstance(major, int) or not isinstance(newest, int):
        return None
    if major <= newest:
        return None
    found = {"gcc": str(major), "newest": str(newest), "nvcc_cuda": str(build.nvcc_cuda)}
    said = f"gcc {major} on PATH; {build.nvcc} (CUDA {build.nvcc_cuda}) accepts gcc up to {newest}"
    return found, [said]


@check("arch_list_invalid")
def arch_list_invalid(environment: Environment, rule: Before) -> Found | None:
    """TORCH_CUDA_ARCH_LIST entries the installed torch does not accept (its cpp_extension's own list)."""
    wanted, names = environment.env_vars.get("TORCH_CUDA_ARCH_LIST"), _build(environment).arch_names
    if not wanted or wanted.strip() in ("native", "all") or names is None:
        return None
    entries = [e for e in wanted.replace(";", " ").split() if e]
    unknown = [e for e in entries if e not in names]
    if not unknown:
        return None
    torch = environment.packages.get("torch") or "?"
    found = {"entries": ", ".join(unknown), "torch": torch}
    return found, [f"TORCH_CUDA_ARCH_LIST={wanted!r}: torch {torch} does not know {', '.join(unknown)}"]


@check("extension_tools_missing")
def extension_tools_missing(environment: Environment, rule: Before) -> Found | None:
    """torch installed, and what its cpp_extension needs absent: setuptools, ninja (any build), nvcc (CUDA builds)."""
    build = environment.stack.build
    if not environment.packages.get("torch") or build is None:
        return None
    missing = []
    if environment.stack.torch_cuda and not build.nvcc:
        missing.append("a CUDA toolkit (no CUDA_HOME, no nvcc on PATH, no /usr/local/cuda)")
    if build.ninja is False:
        missing.append("ninja")
    if build.setuptools is False:
        missing.append("setuptools (torch.utils.cpp_extension imports it)")
    if not missing:
        return None
    return {"missing": " and ".join(missing)}, [f"missing: {m}" for m in missing]


@check("triton_ptxas_vs_gpu", table=frozenset({"capability_max", "capability_min", "cuda_max", "cuda_min", "source"}))
def triton_ptxas_vs_gpu(environment: Environment, rule: Before) -> Found | None:
    """The ptxas Triton assembles with against each GPU (the rule's table: which CUDA releases of ptxas know which
    compute capabilities) and against the driver's CUDA major release."""
    build = _build(environment)
    lines, gpus = [], []
    driver = _release(environment.driver.cuda_driver_version)
    for gpu in environment.driver.gpus:
        capability = _release(gpu.compute_capability)
        if capability is None:
            continue
        # Triton 3.3+ runs ptxas-blackwell for sm_100 and newer when the wheel has it
        blackwell = capability >= (10, 0) and build.triton_ptxas_blackwell
        if blackwell:
            ptxas, ptxas_cuda = build.triton_ptxas_blackwell, build.triton_ptxas_blackwell_cuda
        else:
            ptxas, ptxas_cuda = build.triton_ptxas, build.triton_ptxas_cuda
        cuda = _release(ptxas_cuda)
        if cuda is None:
            continue
        for row in rule.data.get("table", ()):
            low, high = _release(row["capability_min"]), _release(row["capability_max"])
            oldest, newest = _release(row["cuda_min"]), _release(row["cuda_max"]) if row["cuda_max"] else None
            if low is None or high is None or not low <= capability <= high:
                continue
            if (oldest is not None and cuda < oldest) or (newest is not None and cuda > newest):
                arch = "sm_" + "".join(str(p) for p in capability)
                if newest is not None and cuda > newest:
                    knows = f"ptxas knows {arch} up to CUDA {row['cuda_max']}"
                else:
                    knows = f"ptxas knows {arch} from CUDA {row['cuda_min']}"
                lines.append(f"{gpu.name or 'GPU ' + str(gpu.index)} ({arch}): Triton's {ptxas} is CUDA "
                             f"{ptxas_cuda}; {knows}")  # fmt: skip
                gpus.append(arch)
        if driver is not None and cuda[0] > driver[0]:
            supported = environment.driver.cuda_driver_version
            lines.append(f"Triton's ptxas is CUDA {ptxas_cuda}; the driver supports CUDA {supported}: "
                         "it cannot load what that ptxas builds")  # fmt: skip
            gpus.append(f"driver CUDA {environment.driver.cuda_driver_version}")
    if not lines:
        return None
    found = {"gpus": ", ".join(dict.fromkeys(gpus)), "cuda": str(build.triton_ptxas_cuda)}
    return found, list(dict.fromkeys(lines))


def _newer_compilers(environment: Environment, rule: Before, across_major: bool) -> Found | None:
    """Runtime compilers (NVRTC, NVVM) newer than the CUDA release the driver supports, where a package installed
    (the rule's table: compiler, package, use) compiles with them: across a major release, or within the driver's."""
    driver = _release(environment.driver.cuda_driver_version)
    compilers = _build(environment).runtime_compilers
    if driver is None or compilers is None:
        return None
    lines, names, releases = [], [], []
    for found in compilers:
        cuda = _release(found.cuda)
        if cuda is None or cuda[:2] <= driver[:2] or (cuda[0] > driver[0]) != across_major:
            continue
        users = [
            f"{row['package']} {environment.packages.get(row['package'])} ({row['use']})"
            for row in rule.data.get("table", ())
            if row["compiler"] == found.compiler and environment.packages.get(row["package"])
        ]
        if not users:
            continue
        lines.append(f"{found.compiler} CUDA {found.cuda} from {found.source}, used by "
                     f"{', '.join(users)}")  # fmt: skip
        names.append(f"{found.compiler} {found.cuda}")
        releases.append(str(found.cuda))
    if not lines:
        return None
    lines.append(f"NVML: driver {environment.driver.version} supports CUDA {environment.driver.cuda_driver_version}")
    driver_cuda = str(environment.driver.cuda_driver_version)
    return {"compilers": ", ".join(dict.fromkeys(names)), "driver_cuda": driver_cuda, "cuda": releases[0]}, lines


@check("runtime_compiler_newer_major", table=frozenset({"compiler", "package", "use"}))
def runtime_compiler_newer_major(environment: Environment, rule: Before) -> Found | None:
    """A runtime compiler of a newer CUDA major release than the driver's: nothing it builds loads."""
    return _newer_compilers(environment, rule, across_major=True)


@check("runtime_compiler_newer_minor", table=frozenset({"compiler", "package", "use"}))
def runtime_compiler_newer_minor(environment: Environment, rule: Before) -> Found | None:
    """A runtime compiler of the driver's CUDA major release but a newer minor one: its PTX does not load."""
    return _newer_compilers(environment, rule, across_major=False)
