"""The source text of one argument of a call in the program (``x.t()`` of ``ops.add_one(out, x.t())``), so that a
sentence can give the fix in the program's own words. Read only when there is a mismatch to say: the file is parsed
once, the call found by its line and its number of arguments; anything that cannot be read gives None."""

from __future__ import annotations

import ast
import functools
import linecache


@functools.lru_cache(maxsize=32)
def _tree(filename: str) -> tuple[ast.Module, str] | None:
    text = "".join(linecache.getlines(filename))
    if not text:
        return None
    try:
        return ast.parse(text), text
    except (SyntaxError, ValueError):
        return None


def _calls_name(node: ast.Call, name: str) -> bool:
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == name) or (isinstance(func, ast.Name) and func.id == name)


def argument_source(
    filename: str, line: int, position: int | None, keyword: str | None, count: int, name: str = ""
) -> str | None:
    """The text of argument ``position`` (or of keyword ``keyword``) of the call at ``line`` of ``filename`` that
    passes ``count`` arguments: a call of ``name`` (``ops.add_one(...)``) first, else the innermost such call that
    spans the line (in ``ops.add_one(out, row.expand(4, 4))``, ``expand`` also takes two). None when it cannot be
    told."""
    parsed = _tree(filename)
    if parsed is None:
        return None
    tree, text = parsed
    found: ast.Call | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if len(node.args) + len(node.keywords) != count or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        rank = (_calls_name(node, name), node.lineno, node.col_offset)
        if found is None or rank >= (_calls_name(found, name), found.lineno, found.col_offset):
            found = node
    if found is None:
        return None
    if keyword is not None:
        value = next((k.value for k in found.keywords if k.arg == keyword), None)
    else:
        value = found.args[position] if position is not None and position < len(found.args) else None
    return ast.get_source_segment(text, value) if value is not None else None
