"""An op's call contract, read from its package's source by the static scan (``kernel.scan``): its tensors in the
order a call passes them (outputs, then inputs) with dtype, rank and the line that declares each, the compile-time
parameters a call must give, the kinds of device it runs on, and the inputs a ``foreach`` over an output reads at the
output's own index. Read once per source; what cannot be read is said in one line."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.kernel.closures import SameIndexRead
from gpudoctor.kernel.scan import CompileParameter, OpInfo, TensorArg, scan_package

COMPILED_SUFFIXES = (".mojoc", ".mojopkg")
# MAX builds a source folder into <tmp>/.modular_<uid>/mojo_pkg/mojo_pkg_<md5 of the folder's absolute path>.mojoc
_BUILT_BY_MAX = re.compile(r"^mojo_pkg_([0-9a-f]{32})\.mojoc$")
_SEARCH_DEPTH = 3
_SEARCH_FOLDERS = 2000


def shown(path: Path | str) -> str:
    """A path as a sentence names it: relative to the current folder when it lies below it."""
    text = os.fspath(path)
    try:
        relative = os.path.relpath(text)
    except ValueError:
        return text
    return relative if not relative.startswith("..") else text


@dataclass(frozen=True)
class Contract:
    """What a call of one op must match. ``package``: the package folder (or file) as sentences name it."""

    op: str
    package: str
    file: str  # relative to the package
    execute_line: int
    tensors: tuple[TensorArg, ...]
    parameters: tuple[CompileParameter, ...] = ()
    same_index_reads: tuple[SameIndexRead, ...] = ()
    targets: tuple[str, ...] = ("cpu", "gpu")

    @property
    def variadic(self) -> bool:
        return any(t.variadic for t in self.tensors)

    def at(self, line: int | None = None) -> str:
        """``package/file:line`` (the execute line unless another is given)."""
        where = self.file if self.package in ("", ".") else f"{self.package.rstrip('/')}/{self.file}"
        return f"{where}:{line or self.execute_line}"

    @classmethod
    def of(cls, op: OpInfo, package: str) -> Contract:
        return cls(
            op.name,
            package,
            op.file,
            op.execute_line or op.line,
            op.tensors,
            op.compile_parameters,
            op.same_index_reads,
            op.targets,
        )


@dataclass(frozen=True)
class LibraryContracts:
    """The contracts of a library's ops, or why there are none (``unreadable``); ``source`` as sentences name it."""

    source: str
    contracts: Mapping[str, Contract] = field(default_factory=dict)
    unreadable: str | None = None

    def missing(self, op: str) -> str:
        """Why op ``op`` has no contract here, in one line."""
        if self.unreadable:
            return self.unreadable
        return (
            f"op `{op}`: no declaration of it was found in the source of {self.source} (a file that cannot be "
            "read, or code the scan cannot follow): its calls are not checked"
        )


def built_from(path: Path, near: tuple[Path, ...]) -> Path | None:
    """The source folder MAX built ``path`` from, when ``path`` is MAX's own build of a source folder and that folder
    is a package (``__init__.mojo``) in or below one of ``near`` (a few levels down)."""
    named = _BUILT_BY_MAX.match(path.name)
    if named is None:
        return None
    seen = 0
    for root in near:
        for folder, subfolders, files in os.walk(root):
            seen += 1
            depth = len(Path(folder).relative_to(root).parts)
            if seen > _SEARCH_FOLDERS:
                return None
            if depth >= _SEARCH_DEPTH:
                subfolders.clear()
            subfolders[:] = [s for s in subfolders if not s.startswith(".") and s != "__pycache__"]
            if "__init__.mojo" in files and hashlib.md5(os.path.abspath(folder).encode()).hexdigest() == named[1]:
                return Path(folder)
    return None


_READ: dict[str, LibraryContracts] = {}


def read_contracts(source: Path) -> LibraryContracts:
    """The contracts of the ops in ``source`` (a package folder or a .mojo file); cached per path."""
    key = os.path.abspath(source)
    if key not in _READ:
        _READ[key] = _read(source)
    return _READ[key]


def _read(source: Path) -> LibraryContracts:
    name = shown(source)
    if source.suffix in COMPILED_SUFFIXES:
        return LibraryContracts(
            name,
            unreadable=f"the library was made from {name}, which is compiled: without its "
            "source the ops' declarations cannot be read, so their calls are not checked",
        )
    if not source.exists():
        return LibraryContracts(
            name, unreadable=f"the library's source {name} is not there any more: its calls are not checked"
        )
    try:
        scan = scan_package(source)
    except Exception as error:  # the scan is a hint reader: nothing it meets may stop the program
        return LibraryContracts(
            name, unreadable=f"the source of {name} could not be read ({error}): its calls are not checked"
        )
    package = name if source.is_dir() else shown(source.parent)
    contracts = {op.name: Contract.of(op, package) for op in scan.ops if op.execute_line is not None}
    if not contracts:
        return LibraryContracts(
            name,
            unreadable=f"no op with an `execute` was found in the source of {name} (files "
            "that cannot be read, or code the scan cannot follow): its calls are not checked",
        )
    return LibraryContracts(name, contracts)
