"""The matrix on disk: one TOML file per environment under ``rows/``, written so that nothing is ever lost.

Every write is a read-merge-write under an exclusive lock on the matrix folder (``fcntl.flock`` on ``.lock``),
so concurrent writers (parallel sweep cells, two people's `matrix add`) serialise; each writes a temporary
file of its own that only it removes, and replaces the row in one rename. Readers need no lock: they see
the old file or the new one, never a part.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.atomic import PARTIAL_SUFFIX, atomic_write
from gpudoctor.matrix.schema import ROWS_DIR, MatrixError, Row, load_row, merge

LOCK_FILE = ".lock"
ROW_MODE = 0o644  # rows are shared data: readable by everyone, like any file in a checkout


@dataclass(frozen=True)
class Added:
    """What adding a row did: where it went, the row now on disk, and whether it was new or already there."""

    path: Path
    row: Row
    new: bool  # no row for this environment existed
    counted: bool  # False when every report in it had been merged before: nothing changed


class MatrixStore:
    """The rows of one matrix folder."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rows_dir = directory / ROWS_DIR

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's write lock (blocking until other writers are done)."""
        try:
            self.rows_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise MatrixError(f"{self.directory}: cannot write to the matrix: {error.strerror or error}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def add(self, row: Row) -> Added:
        """Merge ``row`` into the file for its environment (or create it); a report already merged counts once."""
        path = self.rows_dir / row.file_name
        with self.locked():
            existing = load_row(path, strict_name=False) if path.exists() else None
            merged = merge(existing, row) if existing else row
            counted = merged is not existing
            if counted:
                try:
                    atomic_write(path, merged.to_toml(), mode=ROW_MODE)
                except OSError as error:
                    raise MatrixError(f"{path}: cannot write: {error.strerror or error}") from error
        return Added(path, merged, existing is None, counted)

    def files(self) -> list[Path]:
        return sorted(self.rows_dir.glob("*.toml")) if self.rows_dir.is_dir() else []

    def check(self, known_probes: set[str] | None) -> tuple[list[Row], list[str]]:
        """Every valid row, and one error line for each file that breaks the schema."""
        rows, errors = [], []
        if not self.rows_dir.is_dir():
            return [], [f"{self.directory}: no {ROWS_DIR}/ folder"]
        for path in self.files():
            try:
                rows.append(load_row(path, known_probes))
            except MatrixError as error:
                errors.append(str(error))
        for stray in sorted(self.rows_dir.iterdir()):
            if stray.is_file() and stray.suffix != ".toml" and not stray.name.endswith(PARTIAL_SUFFIX):
                errors.append(f"{stray}: not a .toml row")
        return rows, errors

    def load(self, known_probes: set[str] | None = None) -> list[Row]:
        """Every row; the first bad file raises MatrixError."""
        rows, errors = self.check(known_probes)
        if errors:
            raise MatrixError(errors[0], hint=f"{len(errors)} bad row file(s); run `gpudoctor matrix check`")
        return rows


def default_matrix_dir(given: Path | None, writing: bool) -> Path:
    """The matrix to use: --matrix, $GPUDOCTOR_MATRIX, ./matrix, the checkout's matrix/, or (to read) the
    copy shipped in the wheel."""
    if given is not None:
        return given
    if env := os.environ.get("GPUDOCTOR_MATRIX"):
        return Path(env)
    package = Path(__file__).resolve().parent.parent
    candidates = [Path.cwd() / "matrix", package.parents[1] / "matrix"]
    if not writing:
        candidates.append(package / "_data" / "matrix")
    for candidate in candidates:
        if (candidate / ROWS_DIR).is_dir():
            return candidate
    raise MatrixError("no matrix folder found", hint="give --matrix DIR (the matrix/ folder of a gpudoctor checkout)")
