"""The line-level reading of Mojo source that the static scans share: comments, brackets, a def's header, and an
``execute`` body walked line by line with the blocks around each line (a nested function, a branch for one target).

Not a Mojo parser: the few shapes custom-op code takes, read well enough for hints and for call contracts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NESTED_FUNCTION = re.compile(r"^\s*(def|fn)\s+\w+")
_BLOCK = re.compile(r"^\s*(?:comptime\s+)?(if|elif|else|for|while|with|try|except|finally)\b.*:\s*$")


def strip_comment(line: str) -> str:
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


def split_top_level(text: str) -> list[str]:
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


def signature(lines: list[str], start: int) -> tuple[str, int]:
    """The text of a def header from ``start`` to its closing ``:``, and the index of its last line."""
    text, depth = [], 0
    for index in range(start, len(lines)):
        line = strip_comment(lines[index])
        for char in line:
            if char in "[(":
                depth += 1
            elif char in "])":
                depth -= 1
        text.append(line.strip())
        if depth <= 0 and line.rstrip().endswith(":"):
            return " ".join(text), index
    return " ".join(text), len(lines) - 1


def statement(lines: list[str], start: int, limit: int = 8) -> str:
    """The statement that starts at ``start``, joined over the lines its open brackets span (at most ``limit``)."""
    text, depth = [], 0
    for index in range(start, min(len(lines), start + limit)):
        line = strip_comment(lines[index])
        depth += sum(char in "[(" for char in line) - sum(char in "])" for char in line)
        text.append(line.strip())
        if depth <= 0:
            break
    return " ".join(text)


def bracket_group(text: str, opening: str) -> tuple[str, str]:
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


def branch_kind(test: str) -> str:
    """ "cpu" or "gpu" for a test of the target device, else "block"."""
    if re.search(r"""is_cpu|==\s*["']cpu["']|["']cpu["']\s*==|!=\s*["']gpu["']""", test):
        return "cpu"
    if re.search(r"""is_gpu|==\s*["']gpu["']|["']gpu["']\s*==|!=\s*["']cpu["']""", test):
        return "gpu"
    return "block"


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


@dataclass(frozen=True)
class BodyLine:
    """One line of code in a body: its index in the file, its code (comment stripped), the kinds of the blocks
    around it ("function", "cpu", "gpu", "block"; a block's own header line counts as inside it), for the header
    of a nested function the index of the header's last line, and the innermost block's kind."""

    index: int
    code: str
    kinds: frozenset[str]
    header_end: int | None = None
    block: str | None = None  # the kind of the innermost block around it; None at the body's own level


@dataclass(frozen=True)
class Body:
    lines: tuple[BodyLine, ...]
    end: int  # the index of the first line after the body


def read_body(lines: list[str], body_start: int, def_indent: int) -> Body:
    """The lines of a def's body (from ``body_start`` to the first line indented no deeper than the def)."""
    blocks: list[tuple[int, str, frozenset[str]]] = []  # (indent, kind, the kinds its if/elif chain tested so far)
    found: list[BodyLine] = []
    index = body_start
    while index < len(lines):
        code = strip_comment(lines[index]).rstrip()
        if not code.strip():
            index += 1
            continue
        depth = indent(code)
        if depth <= def_indent:
            break
        chain: frozenset[str] = frozenset()
        while blocks and blocks[-1][0] >= depth:
            chain = blocks.pop()[2]
        stripped = code.strip()
        if NESTED_FUNCTION.match(code):
            # A nested function (a foreach closure, a kernel launched with enqueue_function) runs on the device;
            # its signature may span lines — `fn k[\n  K: Int,\n](\n  ...\n):` — whose closing lines sit at the
            # def's own indent: they belong to the header, not to the body that follows.
            end = signature(lines, index)[1]
            found.append(BodyLine(index, code, frozenset(kind for _, kind, _ in blocks), end, _innermost(blocks)))
            blocks.append((depth, "function", frozenset()))
            index = end + 1
            continue
        if re.match(r"(comptime\s+)?else\b", stripped) and stripped.endswith(":"):
            # The last branch of a chain that tested one kind of device runs on the other; after `if cpu` and
            # `elif gpu` it runs on neither.
            tested = chain & {"cpu", "gpu"}
            other = {"cpu": "gpu", "gpu": "cpu"}[next(iter(tested))] if len(tested) == 1 else "block"
            blocks.append((depth, other, chain))
        elif _BLOCK.match(code):
            kind = branch_kind(stripped)
            continues = re.match(r"(comptime\s+)?elif\b", stripped) is not None
            blocks.append((depth, kind, (chain if continues else frozenset()) | {kind}))
        found.append(BodyLine(index, code, frozenset(kind for _, kind, _ in blocks), None, _innermost(blocks)))
        index += 1
    return Body(tuple(found), index)


def _innermost(blocks: list[tuple[int, str, frozenset[str]]]) -> str | None:
    return blocks[-1][1] if blocks else None
