"""A static look at a Mojo custom-op package, without a compiler: the ops it registers, the tensors each
``execute`` takes, and the lines of ``execute`` that touch tensor memory from host code.

This is a line-oriented reader of the few shapes custom-op code takes, not a Mojo parser: it is used for
hints and for defaults, and the compiler (run in a probe) stays the judge of what the code means.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.kernelsection import KernelOp, KernelScan, KernelSourceLine, KernelTensorArg
from gpudoctor.textfile import read_source

MAX_FILES = 200
MAX_FILE_BYTES = 2 * 1024 * 1024  # a longer file is not kernel source: skipped, never read in part

_REGISTER = re.compile(r"""^\s*@(?:[\w.]+\.)?register\(\s*["']([^"']+)["']""")
_STRUCT = re.compile(r"^\s*struct\s+(\w+)")
_EXECUTE = re.compile(r"^(\s*)(def|fn)\s+execute\b")
_NESTED_FUNCTION = re.compile(r"^\s*(def|fn)\s+\w+")
_BLOCK = re.compile(r"^\s*(?:comptime\s+)?(if|elif|else|for|while|with|try|except|finally)\b.*:\s*$")
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

    def to_dict(self) -> KernelTensorArg:
        return {"name": self.name, "role": self.role, "dtype": self.dtype, "rank": self.rank, "variadic": self.variadic}


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


def _strip_comment(line: str) -> str:
    """The line without its ``#`` comment (a ``#`` inside a string literal is kept)."""
    quote: str | None = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:i]
    return line


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets or parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _signature(lines: list[str], start: int) -> tuple[str, int]:
    """The text of a def header from ``start`` to its closing ``:``, and the index of its last line."""
    text, depth = [], 0
    for index in range(start, len(lines)):
        line = _strip_comment(lines[index])
        for char in line:
            if char in "[(":
                depth += 1
            elif char in "])":
                depth -= 1
        text.append(line.strip())
        if depth <= 0 and line.rstrip().endswith(":"):
            return " ".join(text), index
    return " ".join(text), len(lines) - 1


def _bracket_group(text: str, opening: str) -> tuple[str, str]:
    """The contents of the first top-level ``opening`` group in ``text`` and what follows it."""
    closing = {"[": "]", "(": ")"}[opening]
    start = text.find(opening)
    if start < 0:
        return "", text
    depth = 0
    for i in range(start, len(text)):
        if text[i] in "[(":
            depth += 1
        elif text[i] in "])":
            depth -= 1
            if depth == 0 and text[i] == closing:
                return text[start + 1 : i], text[i + 1 :]
    return text[start + 1 :], ""


def _parse_execute(header: str) -> tuple[tuple[TensorArg, ...], tuple[str, ...]]:
    after_name = header.split("execute", 1)[1]
    parameters: list[str] = []
    if after_name.lstrip().startswith("["):
        compile_time, after_name = _bracket_group(after_name, "[")
        parameters = [p for p in _split_top_level(compile_time) if p and not p.startswith("target")]
    runtime, _ = _bracket_group(after_name, "(")
    tensors = []
    for argument in _split_top_level(runtime):
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
    return tuple(tensors), tuple(parameters)


def _branch_kind(test: str) -> str:
    """ "cpu" or "gpu" for a test of the target device, else "block"."""
    if re.search(r"""is_cpu|==\s*["']cpu["']|["']cpu["']\s*==|!=\s*["']gpu["']""", test):
        return "cpu"
    if re.search(r"""is_gpu|==\s*["']gpu["']|["']gpu["']\s*==|!=\s*["']cpu["']""", test):
        return "gpu"
    return "block"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _host_indexing(
    lines: list[str], body_start: int, def_indent: int, tensors: tuple[str, ...], file: str
) -> tuple[tuple[SourceLine, ...], int]:
    """Lines of an execute body (from ``body_start``) that index tensors outside a nested function.

    Code inside a branch that only runs on the CPU (``if target == "cpu"``, ``is_cpu[target]()``, the
    ``else`` of an ``is_gpu`` test) is left alone: there, tensor memory is host memory.
    """
    if not tensors:
        return (), body_start
    names = "|".join(re.escape(t) for t in tensors)
    access = re.compile(rf"(?<![\w.])({names})\s*(\[|\.\s*(load|store)\b)")
    blocks: list[tuple[int, str]] = []  # (indent, kind) with kind "function", "cpu", "gpu" or "block"
    found: list[SourceLine] = []
    index = body_start
    while index < len(lines):
        raw = lines[index]
        code = _strip_comment(raw).rstrip()
        if not code.strip():
            index += 1
            continue
        indent = _indent(code)
        if indent <= def_indent:
            break
        closed = "block"
        while blocks and blocks[-1][0] >= indent:
            closed = blocks.pop()[1]
        stripped = code.strip()
        if _NESTED_FUNCTION.match(code):
            # A nested function (a foreach closure, a kernel launched with enqueue_function) runs on the device;
            # its signature may span lines — `fn k[\n  K: Int,\n](\n  ...\n):` — whose closing lines sit at the
            # def's own indent: they belong to the header, not to the body that follows.
            blocks.append((indent, "function"))
            index = _signature(lines, index)[1] + 1
            continue
        if re.match(r"(comptime\s+)?else\b", stripped) and stripped.endswith(":"):
            # The other branch of a target test runs on the other kind of device.
            blocks.append((indent, {"cpu": "gpu", "gpu": "cpu"}.get(closed, "block")))
        elif _BLOCK.match(code):
            blocks.append((indent, _branch_kind(stripped)))
        inside = {kind for _, kind in blocks}
        if "function" not in inside and "cpu" not in inside and access.search(code):
            found.append(SourceLine(file, index + 1, stripped))
        index += 1
    return tuple(found), index


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
        struct_indent = _indent(lines[index])
        index += 1
        while index < len(lines) and (not lines[index].strip() or lines[index].lstrip().startswith("@")):
            index += 1
        if index < len(lines) and (match := _STRUCT.match(lines[index])):
            struct_name = match.group(1)
            index += 1
        tensors: tuple[TensorArg, ...] = ()
        parameters: tuple[str, ...] = ()
        host: tuple[SourceLine, ...] = ()
        # The struct body runs until a line indented no deeper than the decorator.
        while index < len(lines):
            line = lines[index]
            if line.strip() and _indent(line) <= struct_indent and not line.lstrip().startswith("#"):
                break
            execute = _EXECUTE.match(line)
            if execute:
                header, last = _signature(lines, index)
                tensors, parameters = _parse_execute(header)
                host, index = _host_indexing(
                    lines, last + 1, len(execute.group(1)), tuple(t.name for t in tensors), relative
                )
                continue
            index += 1
        ops.append(OpInfo(op_name, struct_name, relative, op_line, tensors, parameters, host))
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
