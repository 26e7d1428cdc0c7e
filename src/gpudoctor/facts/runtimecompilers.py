"""The CUDA compilers programs run at run time — NVRTC (CuPy's kernels, cuda.core's Program) and NVVM (numba-cuda's
@cuda.jit) — and the CUDA release of each copy the examined interpreter would use, from facts already gathered.

Where they come from: pip's nvidia-* distributions (their version is the CUDA release), the libnvrtc the loader
resolves (its real file name carries the release: libnvrtc.so.12.4.127), and the NVVM of the toolkit at CUDA_HOME
(nvcc's release). Nothing is loaded or run. Facts for the pre-flight check of compilers newer than the driver.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# Distributions that ship a runtime compiler (their version is the CUDA release), by compiler.
COMPILER_DISTRIBUTIONS: Mapping[str, tuple[str, ...]] = {
    "NVRTC": ("nvidia-cuda-nvrtc-cu11", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-nvrtc"),
    "NVVM": ("nvidia-cuda-nvcc-cu11", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc", "nvidia-nvvm"),
}
_RELEASE = re.compile(r"^(\d+)\.(\d+)")
_LIBNVRTC_FILE = re.compile(r"^libnvrtc\.so\.(\d+)\.(\d+)\.\d+")


def _release(version: str) -> str | None:
    match = _RELEASE.match(version)
    return f"{match[1]}.{match[2]}" if match else None


def runtime_compilers(
    distributions: Iterable[Any], libraries: Mapping[str, Any], build: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Each runtime compiler found: {"compiler": "NVRTC" or "NVVM", "cuda": "12.4", "from": where it is}, one per
    copy (pip's distribution, the loader's library, the toolkit's NVVM); [] when none is installed."""
    found: list[dict[str, str]] = []
    installed = {str(d[0]).lower(): str(d[1]) for d in distributions if isinstance(d, (list, tuple)) and len(d) >= 2}
    for compiler, names in COMPILER_DISTRIBUTIONS.items():
        for name in names:
            release = _release(installed.get(name, ""))
            if release:
                found.append({"compiler": compiler, "cuda": release, "from": f"pip {name} {installed[name]}"})
    for name, fact in sorted(libraries.items()):
        if not name.startswith("libnvrtc.so") or not isinstance(fact, Mapping):
            continue
        match = _LIBNVRTC_FILE.match(str(fact.get("file") or ""))
        if match and fact.get("same_file") is not True:  # pip's own copy is counted once, by its distribution
            found.append({"compiler": "NVRTC", "cuda": f"{match[1]}.{match[2]}",
                          "from": f"{fact.get('loader')} (the loader's {name})"})  # fmt: skip
    toolkit = build.get("nvcc_cuda")
    if isinstance(toolkit, str) and _release(toolkit) and build.get("cuda_home"):
        found.append({"compiler": "NVVM", "cuda": str(_release(toolkit)),
                      "from": f"the CUDA toolkit at {build.get('cuda_home')}"})  # fmt: skip
    unique = {(f["compiler"], f["cuda"], f["from"]): f for f in found}
    return list(unique.values())
