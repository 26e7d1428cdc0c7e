"""The house's layers, checked from the source: the core never imports a face, faces do not import each other (the
program, gpudoctor.program, starts the TUI a command asks for), and no module grows past what one reader can hold."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

SRC = ROOT / "src" / "gpudoctor"
FACES = ("gpudoctor.cli", "gpudoctor.tui", "gpudoctor.pytest_plugin")
MAX_LINES = 400


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every gpudoctor module ``path`` imports, at the top or lazily inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("gpudoctor")}


def _face(module: str) -> str | None:
    return next((face for face in FACES if module == face or module.startswith(face + ".")), None)


def test_the_core_imports_no_face_and_faces_do_not_import_each_other() -> None:
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        here = _module(path)
        if here in ("gpudoctor.__main__", "gpudoctor.program"):
            continue  # the program: runs a command, and hands the terminal to the TUI where the command asks
        own = _face(here)
        for imported in _imports(path):
            theirs = _face(imported)
            if theirs is None or theirs == own:
                continue
            wrong.append(f"{here} imports {imported}")
    assert wrong == []


def test_no_module_is_longer_than_one_reader_can_hold() -> None:
    long = {_module(p): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
