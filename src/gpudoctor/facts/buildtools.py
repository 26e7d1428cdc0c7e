"""What building a CUDA extension (torch.utils.cpp_extension, a package's setup.py) would use here: the CUDA toolkit
found as cpp_extension finds it (CUDA_HOME, CUDA_PATH, nvcc on PATH, /usr/local/cuda), nvcc's CUDA release, the
host compiler nvcc would run and the newest one the toolkit accepts (its host_config.h), ninja, and the arch names
the installed torch accepts in TORCH_CUDA_ARCH_LIST (read from its cpp_extension.py, never imported).

Facts for the pre-flight checks; nothing here imports torch or compiles anything (``nvcc --version`` and
``gcc -dumpversion`` are asked, each in a few milliseconds, and their answers kept while the programs are unchanged).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpudoctor.facts.answers import ask_program
from gpudoctor.facts.beside import Beside

QUESTION_TIMEOUT_S = 10.0


def find_cuda_home(environ: Mapping[str, str]) -> str | None:
    """The CUDA toolkit folder exactly as torch.utils.cpp_extension picks it: CUDA_HOME, else CUDA_PATH, else two
    levels above the nvcc on PATH, else /usr/local/cuda if it exists."""
    home = environ.get("CUDA_HOME") or environ.get("CUDA_PATH")
    if home:
        return home
    nvcc = shutil.which("nvcc", path=environ.get("PATH"))
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc))
    return "/usr/local/cuda" if os.path.exists("/usr/local/cuda") else None


def _ask(argv: list[str]) -> str | None:
    """What the program printed (stdout then stderr), or None when it could not run or failed (an answer kept from an
    earlier run while the program is unchanged: ``answers.ask_program``)."""
    done = ask_program(argv, QUESTION_TIMEOUT_S)
    return done.stdout + done.stderr if done is not None and done.returncode == 0 else None


def toolkit_root(nvcc: str) -> Path:
    """The toolkit nvcc belongs to: where it says it runs from (``--dryrun`` prints ``_HERE_``; nvcc may be a
    wrapper script elsewhere), else two levels above it."""
    said = _ask([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull]) or ""
    here = re.search(r"^#\$ _HERE_=(.+)$", said, re.M)
    return Path(here.group(1).strip()).parent if here else Path(os.path.realpath(nvcc)).parent.parent


def nvcc_release(nvcc: str) -> str | None:
    """The CUDA release nvcc reports ("release 13.0, V13.0.88" -> "13.0")."""
    said = _ask([nvcc, "--version"])
    found = re.search(r"release (\d+\.\d+)", said or "")
    return found.group(1) if found else None


def newest_host_gcc(nvcc: str) -> int | None:
    """The newest gcc major this toolkit accepts, from its crt/host_config.h ("#if __GNUC__ > 15" -> 15)."""
    root = toolkit_root(nvcc)
    candidates = [root / "include" / "crt" / "host_config.h", *root.glob("targets/*/include/crt/host_config.h")]
    for header in candidates:
        try:
            text = header.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = re.search(r"defined\(__GNUC__\).*?#if __GNUC__ > (\d+)", text, re.S)
        if found:
            return int(found.group(1))
    return None


def host_compiler(environ: Mapping[str, str]) -> tuple[str | None, int | None]:
    """The host compiler nvcc runs (NVCC_CCBIN, CUDAHOSTCXX, else gcc on PATH) and its major version."""
    name = environ.get("NVCC_CCBIN") or environ.get("CUDAHOSTCXX") or "gcc"
    path = shutil.which(name, path=environ.get("PATH"))
    if path is None:
        return None, None
    said = _ask([path, "-dumpfullversion", "-dumpversion"])
    found = re.match(r"\s*(\d+)", said or "")
    return os.path.basename(path), int(found.group(1)) if found else None


def torch_arch_names(torch_folder: str | None) -> list[str] | None:
    """What the installed torch accepts in TORCH_CUDA_ARCH_LIST: its supported_arches (each also with +PTX) and
    named arches, read from torch/utils/cpp_extension.py; None when that file cannot be read."""
    if not torch_folder:
        return None
    try:
        text = (Path(torch_folder) / "utils" / "cpp_extension.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    listed = re.search(r"supported_arches = \[([^\]]*)\]", text)
    if listed is None:
        return None
    arches = re.findall(r"'([^']+)'", listed.group(1))
    named = re.findall(r"\('([A-Za-z+]+)', '[^']*'\)", text)
    return [*arches, *(a + "+PTX" for a in arches), *named]


def build_facts(environ: Mapping[str, str], torch_folder: str | None, interpreter_bin: str | None) -> dict[str, Any]:
    """The facts above; absent tools are None."""
    home = find_cuda_home(environ)
    nvcc = os.path.join(home, "bin", "nvcc") if home else None
    if nvcc is not None and not os.path.exists(nvcc):
        nvcc = None
    release = Beside(nvcc_release, nvcc, name="gpudoctor-nvcc") if nvcc else None  # beside --dryrun, the longer one
    newest = newest_host_gcc(nvcc) if nvcc else None
    compiler, compiler_major = host_compiler(environ)
    nvcc_cuda = release.result() if release else None
    path = os.pathsep.join(p for p in (interpreter_bin, environ.get("PATH")) if p)
    return {
        "cuda_home": home,
        "nvcc": nvcc,
        "nvcc_cuda": nvcc_cuda,
        "host_compiler": compiler,
        "host_compiler_major": compiler_major,
        "newest_host_gcc": newest,
        "ninja": shutil.which("ninja", path=path) is not None,
        "arch_names": torch_arch_names(torch_folder),
    }


def triton_ptxas(site_packages: list[str], environ: Mapping[str, str]) -> dict[str, str | None]:
    """The ptxas Triton assembles with and its CUDA release: TRITON_PTXAS_PATH when set, else the one bundled in the
    Triton wheel (``ptxas-blackwell``, bundled from Triton 3.3 for sm_100 and newer, separately)."""
    found: dict[str, str | None] = {}
    chosen = environ.get("TRITON_PTXAS_PATH")
    for site in site_packages:
        folder = Path(site) / "triton" / "backends" / "nvidia" / "bin"
        if folder.is_dir():
            for name, key in (("ptxas", "triton_ptxas"), ("ptxas-blackwell", "triton_ptxas_blackwell")):
                path = str(chosen) if chosen and name == "ptxas" else str(folder / name)
                if os.path.exists(path):
                    found[key] = path
                    found[f"{key}_cuda"] = nvcc_release(path)
            break
    return found
