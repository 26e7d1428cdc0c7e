"""The parameters of a CUDA C++ kernel read from its source, as CuPy's RawKernel and RawModule compile it: the
``__global__`` function of that name, each parameter's name, base type, pointer depth and size; or one sentence
saying why it cannot be read (a template, a name the source does not declare, a declaration the reader cannot
follow). Text only: nothing is compiled, and a type the reader does not know (a struct) is left unchecked."""

from __future__ import annotations

import re
from dataclasses import dataclass

# C types as NumPy spells the dtype of the same bits (Linux, LP64: long is 8 bytes); None: any array (bytes)
_TYPES: dict[str, str | None] = {
    "float": "float32", "double": "float64", "half": "float16", "__half": "float16",
    "__nv_bfloat16": "bfloat16", "bool": "bool",
    "char": "int8", "signed char": "int8", "int8_t": "int8", "unsigned char": "uint8", "uint8_t": "uint8",
    "short": "int16", "short int": "int16", "int16_t": "int16", "unsigned short": "uint16", "uint16_t": "uint16",
    "int": "int32", "signed": "int32", "signed int": "int32", "int32_t": "int32",
    "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "long": "int64", "long int": "int64", "long long": "int64", "long long int": "int64", "int64_t": "int64",
    "ptrdiff_t": "int64", "ssize_t": "int64", "intptr_t": "int64",
    "unsigned long": "uint64", "unsigned long long": "uint64", "unsigned long long int": "uint64",
    "uint64_t": "uint64", "size_t": "uint64", "uintptr_t": "uint64",
    "void": None,
}  # fmt: skip
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct", "__grid_constant__"}
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_STRINGS = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_ATTRIBUTES = re.compile(r"__launch_bounds__\s*\([^()]*\)|__attribute__\s*\(\(.*?\)\)|__maxnreg__\s*\([^()]*\)")
_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Parameter:
    """One parameter: ``const float* x`` is name "x", base "float", depth 1."""

    name: str
    base: str  # the type less qualifiers and pointers: "float", "unsigned int", "Params"
    depth: int  # pointers: 0 for a value, 1 for float*, 2 for float**

    @property
    def dtype(self) -> str | None:
        """The NumPy dtype of the base type's bits ("float32"); None for void and for a type not known here."""
        return _TYPES.get(self.base)

    @property
    def known(self) -> bool:
        return self.base in _TYPES

    @property
    def written(self) -> str:
        return f"{self.base}{'*' * self.depth} {self.name}"


@dataclass(frozen=True)
class Signature:
    """A kernel's parameters in order, and the line of the source that declares it."""

    kernel: str
    parameters: tuple[Parameter, ...]
    line: int

    @property
    def written(self) -> str:
        return f"{self.kernel}({', '.join(p.written for p in self.parameters)})"


class Unreadable(ValueError):
    """Why a kernel's signature cannot be read: one sentence."""


def _split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside <>, () and []."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    parts.append(text[start:])
    return parts


def _parameter(text: str, kernel: str) -> Parameter:
    declared = " ".join(text.replace("*", " * ").replace("[", " [ ").replace("]", " ] ").split())
    if "&" in declared or "(" in declared or "=" in declared:
        raise Unreadable(f"`{kernel}`'s parameter `{text.strip()}` is not one the signature reader follows")
    words = [w for w in declared.split() if w not in _QUALIFIERS]
    depth = words.count("*") + words.count("[")
    words = [w for w in words if w not in ("*", "[", "]") and not w.isdigit()]
    if len(words) < 2 or not all(_NAME.fullmatch(w) or "::" in w or "<" in w for w in words):
        raise Unreadable(f"`{kernel}`'s parameter `{text.strip()}` is not one the signature reader follows")
    return Parameter(words[-1], " ".join(words[:-1]), depth)


def _parameters_text(source: str, start: int, kernel: str) -> str:
    """What lies between the parenthesis at ``start`` and the one that closes it."""
    depth = 0
    for at in range(start, len(source)):
        if source[at] == "(":
            depth += 1
        elif source[at] == ")":
            depth -= 1
            if depth == 0:
                return source[start + 1 : at]
    raise Unreadable(f"`{kernel}`'s parameter list does not close in the kernel's source")


def read_signature(source: str, kernel: str) -> Signature:
    """The parameters of the ``__global__`` function ``kernel`` in the CUDA C++ ``source``; raises Unreadable."""
    # comments and strings blanked to the same length, so that positions (and lines) stay the source's
    text = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), source)
    text = _STRINGS.sub(lambda m: '"' + " " * (len(m.group()) - 2) + '"', text)
    text = _ATTRIBUTES.sub(lambda m: " " * len(m.group()), text)
    declaration = re.compile(r"__global__\s+(?:[\w:]+\s+)*?void\s+" + re.escape(kernel) + r"\s*\(")
    found = list(declaration.finditer(text))
    if not found:
        raise Unreadable(f"the kernel's source declares no `__global__ void {kernel}(...)` that the signature "
                         "reader can see (a kernel made by a macro, or another name)")  # fmt: skip
    if len(found) > 1:
        raise Unreadable(f"the kernel's source declares `{kernel}` {len(found)} times (overloads)")
    match = found[0]
    before = text[: match.start()].rstrip()
    if before.endswith(">") and re.search(r"template\s*<[^;{}]*>$", before):
        raise Unreadable(f"`{kernel}` is a template kernel (`template<...> __global__`): its parameters' types are "
                         "known only once it is instantiated")  # fmt: skip
    inside = _parameters_text(text, match.end() - 1, kernel).strip()
    parts = [] if inside in ("", "void") else _split_top_level(inside)
    parameters = tuple(_parameter(part, kernel) for part in parts)
    return Signature(kernel, parameters, text.count("\n", 0, match.start()) + 1)
