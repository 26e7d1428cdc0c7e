"""A static look at a Mojo custom-op package, without a compiler: the ops it registers, the tensors and
compile-time parameters each ``execute`` takes, and the lines of ``execute`` that touch tensor memory from host code
(with what its body makes plain about calls: ``kernel.closures``).

This is a line-oriented reader of the few shapes custom-op code takes, not a Mojo parser: it is used for
hints and for defaults, and the compiler (run in a probe) stays the judge of what the code means.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.kernel.closures import TARGETS, SameIndexRead, same_index_reads, targets
from gpudoctor.kernel.mojotext import Body, bracket_group, indent, read_body, signature, split_top_level
from gpudoctor.kernelsection import KernelOp, KernelScan, KernelSourceLine, KernelTensorArg
from gpudoctor.textfile import read_source

MAX_FILES = 200
MAX_FILE_BYTES = 2 * 1024 * 1024  # a longer file is not kernel source: skipped, never read in part

_REGISTER = re.compile(r"""^\s*@(?:[\w.]+\.)?register\(\s*["']([^"']+)["']""")
_STRUCT = re.compile(r"^\s*struct\s+(\w+)")
_EXECUTE = re.compile(r"^(\s*)(def|fn)\s+execute\b")
_DTYPE = re.compile(r"\bdtype\s*=\s*(?:DType)?\.(\w+)")  # DType.int32, or 26.7's shorthand .int32
_RANK = re.compile(r"\brank\s*=\s*(\d+)")
_LEGACY_IMPORT = re.compile(
    r"^\s*(?:from\s+(compiler|tensor|runtime\.asyncrt)\s+import\b|import\s+(compiler|tensor|runtime\.asyncrt)\b)"
)


@dataclass(frozen=True)
class TensorArg:
    """One run-time tensor argument of ``execute``."""

    name: str
    role: str  # "output" or "input"
    dtype: str | None = None  # e.g. "float32"; None when the signature leaves it generic
    rank: int | None = None
    variadic: bool = False
    line: int | None = None  # where the signature declares it (1-based); not part of the report

    def to_dict(self) -> KernelTensorArg:
        return {"name": self.name, "role": self.role, "dtype": self.dtype, "rank": self.rank, "variadic": self.variadic}


@dataclass(frozen=True)
class CompileParameter:
    """One compile-time parameter of ``execute`` besides ``target``: ``inferred`` when the call need not give it (it
    stands before ``//``, or a tensor's type names it, or it is one of MAX's own, ``_name``)."""

    name: str
    type: str | None = None
    default: str | None = None
    inferred: bool = False

    @property
    def required(self) -> bool:
        return self.default is None and not self.inferred

    def __str__(self) -> str:
        return self.name + (f": {self.type}" if self.type else "") + (f" = {self.default}" if self.default else "")


@dataclass(frozen=True)
class SourceLine:
    """A line worth pointing at, relative to the package root."""

    file: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"

    def to_dict(self) -> KernelSourceLine:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class OpInfo:
    """An op registered with ``@register("name")`` and what its ``execute`` looks like."""

    name: str
    struct: str | None
    file: str
    line: int
    tensors: tuple[TensorArg, ...] = ()
    parameters: tuple[str, ...] = ()  # compile-time parameters besides ``target``, as written
    host_indexing: tuple[SourceLine, ...] = ()
    # What a call must match, beyond the report's view of the op (kernel.closures; gpudoctor.calls reads them):
    execute_line: int | None = None
    compile_parameters: tuple[CompileParameter, ...] = ()
    same_index_reads: tuple[SameIndexRead, ...] = ()
    targets: tuple[str, ...] = TARGETS

    @property
    def outputs(self) -> tuple[TensorArg, ...]:
        return tuple(t for t in self.tensors if t.role == "output")

    @property
    def inputs(self) -> tuple[TensorArg, ...]:
        return tuple(t for t in self.tensors if t.role == "input")

    def to_dict(self) -> KernelOp:
        return {
            "name": self.name,
            "struct": self.struct,
            "file": self.file,
            "line": self.line,
            "tensors": [t.to_dict() for t in self.tensors],
            "parameters": list(self.parameters),
            "host_indexing": [h.to_dict() for h in self.host_indexing],
        }


@dataclass(frozen=True)
class PackageScan:
    """What the scan saw in a package directory (or a single .mojo file)."""

    is_package: bool  # a directory with __init__.mojo, or a .mojopkg/.mojoc file
    files: tuple[str, ...] = ()
    ops: tuple[OpInfo, ...] = ()
    legacy_imports: tuple[SourceLine, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def op(self, name: str) -> OpInfo | None:
        return next((o for o in self.ops if o.name == name), None)

    @property
    def host_indexing(self) -> tuple[SourceLine, ...]:
        return tuple(line for op in self.ops for line in op.host_indexing)

    def to_dict(self) -> KernelScan:
        return {
            "is_package": self.is_package,
            "files": list(self.files),
            "ops": [o.to_dict() for o in self.ops],
            "legacy_imports": [s.to_dict() for s in self.legacy_imports],
            "notes": list(self.notes),
        }


def _compile_parameters(text: str, annotations: str) -> tuple[CompileParameter, ...]:
    """The compile-time parameters as declared; ``annotations``: the run-time arguments' text, where a parameter a
    tensor's type names (``dtype=dtype``) is bound from the tensor."""
    found: list[CompileParameter] = []
    for item in split_top_level(text):
        if item == "//":  # what stands before it is infer-only
            found = [CompileParameter(p.name, p.type, p.default, True) for p in found]
            continue
        declared, _, default = item.partition("=")
        name, _, kind = declared.partition(":")
        name = name.strip().lstrip("*")
        if not name.isidentifier() or name == "target":
            continue
        from_tensor = re.search(rf"=\s*{re.escape(name)}\b", annotations) is not None
        inferred = from_tensor or name.startswith("_")
        found.append(CompileParameter(name, kind.strip() or None, default.strip() or None, inferred))
    return tuple(found)


def _parse_execute(header: str) -> tuple[tuple[TensorArg, ...], tuple[str, ...], tuple[CompileParameter, ...]]:
    after_name = header.split("execute", 1)[1]
    parameters: list[str] = []
    compile_time = ""
    if after_name.lstrip().startswith("["):
        compile_time, after_name = bracket_group(after_name, "[")
        parameters = [p for p in split_top_level(compile_time) if p and not p.startswith("target")]
    runtime, _ = bracket_group(after_name, "(")
    tensors = []
    for argument in split_top_level(runtime):
        name, _, annotation = argument.partition(":")
        annotation = annotation.strip()
        type_name = re.match(r"[\w.]+", annotation)
        if not type_name:
            continue
        kind = type_name.group(0).rsplit(".", 1)[-1]
        if "Tensor" not in kind:
            continue
        role = "output" if "Output" in kind or "Mutable" in kind else "input"
        dtype = _DTYPE.search(annotation)
        rank = _RANK.search(annotation)
        tensors.append(
            TensorArg(
                name=name.strip().split()[-1],
                role=role,
                dtype=dtype.group(1) if dtype else None,
                rank=int(rank.group(1)) if rank else None,
                variadic="Variadic" in kind,
            )
        )
    return tuple(tensors), tuple(parameters), _compile_parameters(compile_time, runtime)


def _with_lines(tensors: tuple[TensorArg, ...], lines: list[str], first: int, last: int) -> tuple[TensorArg, ...]:
    """Each tensor with the line of the signature that declares it."""
    placed = []
    for tensor in tensors:
        pattern = re.compile(rf"(?<![\w.]){re.escape(tensor.name)}\s*:")
        line = next((i + 1 for i in range(first, last + 1) if pattern.search(lines[i])), None)
        placed.append(TensorArg(tensor.name, tensor.role, tensor.dtype, tensor.rank, tensor.variadic, line))
    return tuple(placed)


def _host_indexing(body: Body, tensors: tuple[str, ...], file: str) -> tuple[SourceLine, ...]:
    """Lines of an execute body that index tensors outside a nested function.

    Code inside a branch that only runs on the CPU (``if target == "cpu"``, ``is_cpu[target]()``, the
    ``else`` of an ``is_gpu`` test) is left alone: there, tensor memory is host memory.
    """
    if not tensors:
        return ()
    names = "|".join(re.escape(t) for t in tensors)
    access = re.compile(rf"(?<![\w.])({names})\s*(\[|\.\s*(load|store)\b)")
    return tuple(
        SourceLine(file, line.index + 1, line.code.strip())
        for line in body.lines
        if line.header_end is None and not {"function", "cpu"} & line.kinds and access.search(line.code)
    )


def _read_execute(op: OpInfo, lines: list[str], start: int, def_indent: int) -> tuple[OpInfo, int]:
    """``op`` with what its execute (its header at ``start``) declares and does; and the index after its body."""
    header, last = signature(lines, start)
    tensors, parameters, compile_parameters = _parse_execute(header)
    body: Body = read_body(lines, last + 1, def_indent)
    names = tuple(t.name for t in tensors)
    outputs = tuple(t.name for t in tensors if t.role == "output")
    inputs = tuple(t.name for t in tensors if t.role == "input")
    return OpInfo(
        op.name, op.struct, op.file, op.line, _with_lines(tensors, lines, start, last), parameters,
        _host_indexing(body, names, op.file), start + 1, op.compile_parameters + compile_parameters,
        same_index_reads(lines, body, outputs, inputs), targets(body),
    ), body.end  # fmt: skip


def _scan_file(path: Path, relative: str) -> tuple[list[OpInfo], list[SourceLine]]:
    text = read_source(path, MAX_FILE_BYTES)
    if text is None:
        return [], []
    lines = text.splitlines()
    ops: list[OpInfo] = []
    legacy = [SourceLine(relative, i + 1, line.strip()) for i, line in enumerate(lines) if _LEGACY_IMPORT.match(line)]
    index = 0
    while index < len(lines):
        registered = _REGISTER.match(lines[index])
        if not registered:
            index += 1
            continue
        op_name, op_line = registered.group(1), index + 1
        struct_name = None
        struct_indent = indent(lines[index])
        index += 1
        while index < len(lines) and (not lines[index].strip() or lines[index].lstrip().startswith("@")):
            index += 1
        struct_parameters: tuple[CompileParameter, ...] = ()
        if index < len(lines) and (match := _STRUCT.match(lines[index])):
            struct_name = match.group(1)
            header, last = signature(lines, index)
            after = header.split(struct_name, 1)[1].lstrip()
            if after.startswith("["):  # `struct AddConstant[value: Int]:`, set by a call's op[{"value": 5}]
                struct_parameters = _compile_parameters(bracket_group(after, "[")[0], "")
            index = last + 1
        op = OpInfo(op_name, struct_name, relative, op_line, compile_parameters=struct_parameters)
        # The struct body runs until a line indented no deeper than the decorator.
        while index < len(lines):
            line = lines[index]
            if line.strip() and indent(line) <= struct_indent and not line.lstrip().startswith("#"):
                break
            execute = _EXECUTE.match(line)
            if execute:
                op, index = _read_execute(op, lines, index, len(execute.group(1)))
                continue
            index += 1
        ops.append(op)
    return ops, legacy


def _mojo_files(root: Path) -> Iterator[Path]:
    count = 0
    for path in sorted(root.rglob("*")):
        if path.suffix in (".mojo", ".🔥") and path.is_file():
            count += 1
            if count > MAX_FILES:
                return
            yield path


def scan_package(path: Path) -> PackageScan:
    """Scan a package directory (or one .mojo file); a compiled package can only be named, not read."""
    if path.is_file() and path.suffix in (".mojopkg", ".mojoc"):
        return PackageScan(is_package=True, notes=(f"{path.name} is compiled; only the compiler can list its ops",))
    if path.is_file():
        root, files = path.parent, [path]
        is_package = False
    else:
        root, files = path, list(_mojo_files(path))
        is_package = (path / "__init__.mojo").is_file() or (path / "__init__.🔥").is_file()
    ops: list[OpInfo] = []
    legacy: list[SourceLine] = []
    for file in files:
        found, old = _scan_file(file, file.relative_to(root).as_posix())
        ops += found
        legacy += old
    notes = []
    if len(files) >= MAX_FILES:
        notes.append(f"only the first {MAX_FILES} .mojo files were read")
    names = tuple(f.relative_to(root).as_posix() for f in files)
    return PackageScan(is_package, names, tuple(ops), tuple(legacy), tuple(notes))
