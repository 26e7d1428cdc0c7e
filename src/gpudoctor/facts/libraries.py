"""CUDA's shared libraries as the dynamic loader would resolve them, without loading any: for each name (libcuda.so.1,
the unversioned libcuda.so Triton links with, libnvrtc, libnvJitLink, cudart, cuBLAS, cuDNN, ...) the file a
dlopen by name finds (LD_LIBRARY_PATH, then the ld.so cache, then the default folders, as glibc searches), and the
copy pip's nvidia-* wheels installed beside the examined interpreter.

Facts for the pre-flight checks; paths are redacted by the caller before they go into a report.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gpudoctor.facts.answers import ask_program

# Names looked up: what the stacks gpudoctor examines open by name (CuPy and numba-cuda by CUDA major release).
LIBRARY_NAMES = (
    "libcuda.so.1", "libcuda.so",
    "libnvrtc.so.11.2", "libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so",
    "libnvJitLink.so.12", "libnvJitLink.so.13",
    "libcudart.so.11.0", "libcudart.so.12", "libcudart.so.13",
    "libcublas.so.12", "libcublas.so.13", "libcublasLt.so.12", "libcublasLt.so.13",
    "libcudnn.so.8", "libcudnn.so.9", "libnvvm.so", "libnvvm.so.4",
)  # fmt: skip
DEFAULT_FOLDERS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")
LD_SO_CACHE = "/etc/ld.so.cache"  # what `ldconfig -p` lists: its answer is kept while this file is unchanged
LDCONFIG_TIMEOUT_S = 5.0


def ld_cache() -> dict[str, str]:
    """The ld.so cache (``ldconfig -p``) as name -> path, this architecture's entries first; {} when there is no
    ldconfig (some containers, NixOS) — which is itself what the loader then does without."""
    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"):
        listed = ask_program([ldconfig, "-p"], LDCONFIG_TIMEOUT_S, reads=[LD_SO_CACHE])
        if listed is None:
            continue
        wanted = {"x86_64": "x86-64", "aarch64": "AArch64"}.get(platform.machine(), "")
        cache: dict[str, str] = {}
        for line in listed.stdout.splitlines():
            name, arrow, path = line.strip().partition(" => ")
            if arrow and wanted in name:  # on x86_64, "(libc6)" alone is a 32-bit library
                cache.setdefault(name.split(" ", 1)[0], path.strip())
        return cache
    return {}


def pip_copies(site_packages: Iterable[str]) -> dict[str, str]:
    """The CUDA libraries pip's nvidia-* wheels installed (site-packages/nvidia/<component>/lib/, and the CUDA 13
    wheels' nvidia/cu13/lib/), by file name."""
    found: dict[str, str] = {}
    for site in site_packages:
        root = Path(site) / "nvidia"
        if not root.is_dir():
            continue
        for lib in sorted(root.glob("*/lib")) + sorted(root.glob("*/*/lib")):
            try:
                names = sorted(os.listdir(lib))
            except OSError:
                continue
            for name in names:
                if name.startswith("lib") and ".so" in name:
                    found.setdefault(name, str(lib / name))
    return found


def resolve(name: str, ld_library_path: Sequence[str], cache: Mapping[str, str]) -> tuple[str, str] | None:
    """Where a dlopen of ``name`` (no RPATH) finds it, and by which rule; None when it does not."""
    for folder in ld_library_path:
        if folder and os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name), "LD_LIBRARY_PATH"
    if name in cache and os.path.exists(cache[name]):
        return cache[name], "ld.so cache"
    for folder in DEFAULT_FOLDERS:
        if os.path.exists(os.path.join(folder, name)):
            return os.path.join(folder, name), "default folder"
    return None


def library_facts(
    site_packages: Iterable[str],
    environ: Mapping[str, str] | None = None,
    cache: Mapping[str, str] | None = None,
) -> dict[str, dict[str, str | bool | None]]:
    """Each name of LIBRARY_NAMES found anywhere: the file the loader resolves it to (and by which rule), the
    realpath's file name (it carries the full version: libcudart.so.12.4.127), pip's copy, and whether the two are
    one file. Names found nowhere are left out."""
    environ = os.environ if environ is None else environ
    cache = ld_cache() if cache is None else cache
    folders = [f for f in environ.get("LD_LIBRARY_PATH", "").split(":") if f]
    pip = pip_copies(site_packages)
    facts: dict[str, dict[str, str | bool | None]] = {}
    for name in LIBRARY_NAMES:
        loader = resolve(name, folders, cache)
        copy = pip.get(name)
        if loader is None and copy is None:
            continue
        facts[name] = {
            "loader": loader[0] if loader else None,
            "via": loader[1] if loader else None,
            "file": os.path.basename(os.path.realpath(loader[0])) if loader else None,
            "pip": copy,
            "same_file": None if not (loader and copy) else os.path.realpath(loader[0]) == os.path.realpath(copy),
        }
    return facts
