"""The facts the inventory reads about the examined interpreter's stack without importing it, as typed, frozen
records: where each module would be imported from, what building and loading GPU code would use, the driver's files.

Part of the report's shape (``model.Environment.stack``): ``report.codec`` encodes, decodes and documents them. A field
is None where the report was recorded before the inventory collected it, and is then left out of the JSON (field
metadata ``omit_none``); ``kept_with`` names the field beside which a None is still written (as the inventory always
wrote it), ``name`` the JSON key of a field whose key is no Python name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# A fact left out of the JSON while None (unless the field ``kept_with`` names is there: then it is written as null).
_OMIT_NONE: Mapping[str, Any] = {"omit_none": True}


@dataclass(frozen=True)
class LibraryFact:
    """One CUDA library as the dynamic loader would resolve it by name, and pip's nvidia-* copy of it."""

    loader: str | None = None  # the file a dlopen by name finds (None: it finds none)
    via: str | None = None  # by which rule: "LD_LIBRARY_PATH", "ld.so cache", "default folder"
    file: str | None = None  # the real file's name (it carries the full version: libcudart.so.12.4.127)
    pip: str | None = None  # the copy pip's nvidia-* wheels installed
    same_file: bool | None = None  # whether the loader's and pip's are one file (None unless both are there)


@dataclass(frozen=True)
class RuntimeCompiler:
    """A CUDA compiler programs run at run time (NVRTC, NVVM), one copy of it, and the CUDA release it is."""

    compiler: str  # "NVRTC" or "NVVM"
    cuda: str  # "12.4"
    source: str = field(metadata={"name": "from"})  # where it comes from: a pip distribution, a library, a toolkit


SANITIZER_INSTALL_HINT = 'pip install "gpudoctor[sanitizer]" (nvidia-cuda-sanitizer-api), or the CUDA toolkit'


@dataclass(frozen=True)
class Sanitizer:
    """The compute-sanitizer the GPU's instruments would run (gpudoctor.facts.sanitizer finds it)."""

    path: str
    found_by: str  # "CUDA_HOME", "PATH", "/usr/local/cuda", "pip wheel"


@dataclass(frozen=True)
class BuildFacts:
    """What building a CUDA extension (torch.utils.cpp_extension) and Triton's kernels would use: the toolkit, nvcc's
    CUDA release, the host compiler and the newest one the toolkit accepts, ninja, setuptools, the arch names torch
    accepts in TORCH_CUDA_ARCH_LIST, Triton's ptxas, and the runtime compilers."""

    cuda_home: str | None = None
    nvcc: str | None = None
    nvcc_cuda: str | None = None
    host_compiler: str | None = None
    host_compiler_major: int | None = None
    newest_host_gcc: int | None = None
    ninja: bool | None = None
    arch_names: tuple[str, ...] | None = None
    setuptools: bool | None = field(default=None, metadata=_OMIT_NONE)
    triton_ptxas: str | None = field(default=None, metadata=_OMIT_NONE)  # only where Triton's wheel has it
    triton_ptxas_cuda: str | None = field(default=None, metadata={**_OMIT_NONE, "kept_with": "triton_ptxas"})
    triton_ptxas_blackwell: str | None = field(default=None, metadata=_OMIT_NONE)  # Triton 3.3+, for sm_100 and newer
    triton_ptxas_blackwell_cuda: str | None = field(
        default=None, metadata={**_OMIT_NONE, "kept_with": "triton_ptxas_blackwell"}
    )
    runtime_compilers: tuple[RuntimeCompiler, ...] | None = field(default=None, metadata=_OMIT_NONE)
    # the GPU's instruments (`gpudoctor run`, `kernel --sanitize`): where compute-sanitizer is, and how it was found
    compute_sanitizer: str | None = field(default=None, metadata=_OMIT_NONE)
    compute_sanitizer_from: str | None = field(default=None, metadata={**_OMIT_NONE, "kept_with": "compute_sanitizer"})


@dataclass(frozen=True)
class UnmetRequirement:
    """A requirement an installed distribution declares that the installed ones do not meet (as `pip check`)."""

    package: str
    version: str
    requirement: str  # as declared: "markdown-it-py>=2.2.0"
    needs: str  # the distribution required
    installed: str | None  # its installed version; None when it is not installed

    def __str__(self) -> str:
        what = "which is not installed" if self.installed is None else f"but {self.needs} {self.installed} is installed"
        return f"{self.package} {self.version} requires {self.requirement}, {what}"


@dataclass(frozen=True)
class DeviceNodes:
    """The NVIDIA device nodes in /dev, and those this user cannot open for reading and writing."""

    present: tuple[str, ...] = ()
    inaccessible: tuple[str, ...] = ()


@dataclass(frozen=True)
class StackFacts:
    """What the inventory read of the examined stack without importing it: where torch/max/mojo/cuda/... would be
    imported from, names shadowed by files of the user's, the site-packages folders, the CUDA release torch was
    built for, packages without bytecode, unmet requirements, build and load facts, and the driver's files."""

    # module name -> the file or folder it would be imported from (None: not found)
    modules: Mapping[str, str | None] | None = field(default=None, metadata=_OMIT_NONE)
    shadowing: tuple[str, ...] | None = field(default=None, metadata=_OMIT_NONE)  # found first, installed by no one
    site_packages: tuple[str, ...] | None = field(default=None, metadata=_OMIT_NONE)
    # from torch/version.py, never imported; null (not absent) where torch is not there
    torch_cuda: str | None = field(default=None, metadata={**_OMIT_NONE, "kept_with": "modules"})
    no_bytecode: tuple[str, ...] | None = field(default=None, metadata=_OMIT_NONE)  # no __pycache__ beside them
    requirements_unmet: tuple[UnmetRequirement, ...] | None = field(default=None, metadata=_OMIT_NONE)
    build: BuildFacts | None = field(default=None, metadata=_OMIT_NONE)
    libraries: Mapping[str, LibraryFact] | None = field(default=None, metadata=_OMIT_NONE)  # by the name dlopen asks
    kernel_module: str | None = field(default=None, metadata=_OMIT_NONE)  # the loaded NVIDIA kernel module's version
    nvml_library: str | None = field(default=None, metadata=_OMIT_NONE)  # the user-space NVML library's version
    device_nodes: DeviceNodes | None = field(default=None, metadata=_OMIT_NONE)
