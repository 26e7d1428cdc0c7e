"""No kernel image for this GPU: which arch each of the program's binaries was built for — the options its own source
gives a compiler (NVRTC's `--gpu-architecture=sm_80`, nvcc's `-gencode arch=compute_80,code=sm_80`, a
TORCH_CUDA_ARCH_LIST it sets), and what `cuobjdump --list-elf/--list-ptx` finds in the extension libraries it had
mapped that are its own (not an installed package's). Read once after the failure; bounded, never raises.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpudoctor.redact import redact_text

_OPTION = re.compile(
    r"(?P<text>(?:--gpu-architecture|-arch|--gpu-name|-gencode)[= ]?\s*['\"]?(?:arch=)?"
    r"(?P<arch>(?:sm|compute)_\d+[af]?)(?:,code=['\"]?\[?(?P<code>(?:sm|compute)_\d+[af]?))?"
    r"|TORCH_CUDA_ARCH_LIST['\"]?\]?\s*[=:,]\s*['\"](?P<list>[\d.;+ A-Za-z]+))"
)
_ELF = re.compile(r"ELF file\s+\d+:\s+\S*?\.(sm_\d+[af]?)\.cubin")
_PTX = re.compile(r"PTX file\s+\d+:\s+\S*?\.(sm_\d+[af]?)\.ptx")
# Where installed code lives (any package's, the interpreter's, the system's): not the program's own build.
_INSTALLED = re.compile(r"(?:site|dist)-packages/|/lib-dynload/|^/(?:usr|lib|lib64|bin|sbin|etc)/|/\.pyenv/|/conda/")
MAX_BINARIES = 8
CUOBJDUMP_TIMEOUT_S = 20.0


def source_archs(sources: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """Each compiler option in the program's own files that names an arch: file, line, the option's text, archs."""
    found: list[dict[str, Any]] = []
    for name, text in sources:
        for number, line in enumerate(text.splitlines(), start=1):
            if line.lstrip().startswith(("#", "//")):
                continue  # a comment names an arch; it builds nothing
            for match in _OPTION.finditer(line):
                if any(f["file"] == name and f["text"] == match["text"].strip("'\" ") for f in found):
                    continue
                if match["list"]:
                    archs = [f"sm_{a.replace('.', '').replace('+PTX', '')}" for a in re.split(r"[;\s]+", match["list"])
                             if a.strip()]  # fmt: skip
                else:
                    archs = [match["code"] or match["arch"]]
                found.append({"file": name, "line": number, "text": match["text"].strip("'\" "), "archs": archs})
    return found[:16]


def find_cuobjdump(env: Mapping[str, str]) -> str | None:
    for home in (env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(candidate := os.path.join(home, "bin", "cuobjdump"), os.X_OK):
            return candidate
    return shutil.which("cuobjdump", path=env.get("PATH"))


def _listed(tool: str, flag: str, path: str) -> str:
    try:
        done = subprocess.run([tool, flag, path], capture_output=True, text=True, timeout=CUOBJDUMP_TIMEOUT_S,
                              check=False, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def own_libraries(mapped: Iterable[str]) -> list[str]:
    """The shared libraries the program had mapped that are its own builds (a torch extension's cache, a build
    folder), not an installed package's or the system's."""
    paths = (os.path.expanduser(p) for p in mapped)  # a home folder was redacted to ~ (the same user)
    return [p for p in paths if p.endswith(".so") and not _INSTALLED.search(p) and Path(p).is_file()][:MAX_BINARIES]


def binary_archs(mapped: Iterable[str], env: Mapping[str, str]) -> tuple[list[dict[str, Any]], str | None]:
    """What cuobjdump lists in each of the program's own libraries: SASS archs and PTX archs (a library with neither
    holds no GPU code and is left out); and why none could be read, where that is so."""
    libraries = own_libraries(mapped)
    if not libraries:
        return [], None
    tool = find_cuobjdump(env)
    if tool is None:
        return (
            [],
            "cuobjdump not found (CUDA_HOME, PATH, /usr/local/cuda): the archs of the program's libraries not read",
        )
    found = []
    for path in libraries:
        sass = sorted(set(_ELF.findall(_listed(tool, "--list-elf", path))))
        ptx = sorted(set(_PTX.findall(_listed(tool, "--list-ptx", path))))
        if sass or ptx:
            found.append({"path": redact_text(path), "sass": sass, "ptx": ptx})
    return found, None
