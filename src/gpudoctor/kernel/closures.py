"""What an op's ``execute`` body makes plain about how it may be called, read without a compiler: the inputs that a
``foreach`` over an output loads at the output's own index (so each must be at least as large as that output), and
the targets the body refuses (a ``raise`` that is all of a branch for one kind of device, a compile-time assertion on
the target)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpudoctor.kernel.mojotext import Body, BodyLine, bracket_group, branch_kind, indent, split_top_level, statement

TARGETS = ("cpu", "gpu")
_FOREACH = re.compile(r"(?<![\w.])foreach\s*\[")
_DEF_NAME = re.compile(r"\s*(?:def|fn)\s+(\w+)\s*")
_REFUSAL = re.compile(r"^(raise\b|abort\s*\()")
_ASSERTION = re.compile(r"^(comptime\s+assert\b|constrained\s*\[)")


@dataclass(frozen=True)
class SameIndexRead:
    """A ``foreach`` over ``output`` whose closure loads ``input`` at the index it is given (line ``line``, 1-based):
    every index of the output is read from the input. ``only``: "cpu" or "gpu" when that foreach runs in a branch for
    one kind of device."""

    output: str
    input: str
    line: int
    only: str | None = None


def _closure_index(header: str) -> str | None:
    """The name of a nested function's first run-time parameter (a foreach closure's index)."""
    named = _DEF_NAME.match(header)
    if named is None:
        return None
    rest = header[named.end() :]
    if rest.startswith("["):
        _, rest = bracket_group(rest, "[")
    arguments, _ = bracket_group(rest, "(")
    first = split_top_level(arguments)
    if not first:
        return None
    name = first[0].split(":", 1)[0].strip().split()
    return name[-1] if name and name[-1].isidentifier() else None


def _closures(lines: list[str], body: Body) -> dict[str, tuple[str | None, list[BodyLine]]]:
    """Each nested function of the body: its index parameter and the lines of its own body."""
    found: dict[str, tuple[str | None, list[BodyLine]]] = {}
    for position, line in enumerate(body.lines):
        if line.header_end is None or (named := _DEF_NAME.match(line.code)) is None:
            continue
        header = " ".join(part.strip() for part in lines[line.index : line.header_end + 1])
        own = indent(line.code)
        inside = []
        for later in body.lines[position + 1 :]:
            if indent(later.code) <= own:
                break
            inside.append(later)
        found.setdefault(named.group(1), (_closure_index(header), inside))
    return found


def _foreach_call(text: str) -> tuple[str, str] | None:
    """(closure, output) of a foreach call: ``foreach[target=t](closure, output, ctx)`` (Mojo 1.x) or
    ``foreach[closure, target=t](output, ctx)`` (MAX 25.x-26.1)."""
    found = _FOREACH.search(text)
    if found is None:
        return None
    parameters, after = bracket_group(text[found.start() :], "[")
    arguments = split_top_level(bracket_group(after, "(")[0])
    named = split_top_level(parameters)
    if named and "=" not in named[0]:
        closure, output = named[0], arguments[0] if arguments else ""
    elif len(arguments) >= 2:
        closure, output = arguments[0], arguments[1]
    else:
        return None
    closure_name, output_name = re.match(r"\w*", closure.strip()), re.match(r"\w*", output.strip())
    if not closure_name or not output_name or not closure_name.group(0) or not output_name.group(0):
        return None
    return closure_name.group(0), output_name.group(0)


def same_index_reads(
    lines: list[str], body: Body, outputs: tuple[str, ...], inputs: tuple[str, ...]
) -> tuple[SameIndexRead, ...]:
    """Every input a foreach over an output loads at the foreach's own index."""
    closures = _closures(lines, body)
    reads: dict[tuple[str, str, str | None], SameIndexRead] = {}
    for line in body.lines:
        if "function" in line.kinds or line.header_end is not None or not _FOREACH.search(line.code):
            continue
        call = _foreach_call(statement(lines, line.index))
        if call is None or call[1] not in outputs or call[0] not in closures:
            continue
        index, inside = closures[call[0]]
        if index is None:
            continue
        only = "cpu" if "cpu" in line.kinds else "gpu" if "gpu" in line.kinds else None
        load = re.compile(rf"(?<![\w.])(\w+)\s*\.\s*load\s*(?:\[[^\]]*\])?\s*\(\s*{re.escape(index)}\s*\)")
        for code_line in inside:
            for found in load.finditer(code_line.code):
                if found.group(1) in inputs:
                    key = (call[1], found.group(1), only)
                    reads.setdefault(key, SameIndexRead(call[1], found.group(1), code_line.index + 1, only))
    return tuple(reads.values())


def targets(body: Body) -> tuple[str, ...]:
    """The kinds of device ``execute`` runs on: both, less one whose branch is nothing but a refusal (``raise``) or
    that a compile-time assertion on the target excludes."""
    refused: set[str] = set()
    for line in body.lines:
        if "function" in line.kinds or line.header_end is not None:
            continue
        stripped = line.code.strip()
        if line.block in TARGETS and _REFUSAL.match(stripped):
            refused.add(line.block)
        elif line.block is None and _ASSERTION.match(stripped):
            allowed = branch_kind(stripped)
            refused.update(t for t in TARGETS if allowed in TARGETS and t != allowed)
    left = tuple(t for t in TARGETS if t not in refused)
    return left or TARGETS  # a body that refuses both says nothing the scan can use
