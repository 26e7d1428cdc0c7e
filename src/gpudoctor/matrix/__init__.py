"""The shared compatibility matrix: one TOML file per environment under ``matrix/rows/``.

One module per job: ``schema`` (what a row is, building and merging rows, validation), ``store`` (the
folder on disk: locked read-merge-write, atomic replace), ``query`` (filters, nearest rows, transitions:
data) and ``render`` (README.md from its template, `show` and `near` as text). This module re-exports the
names faces use.
"""

from __future__ import annotations

from pathlib import Path

from gpudoctor.matrix.pins import PinOption, pin_options
from gpudoctor.matrix.query import (
    FIELD_WEIGHTS,
    Nearness,
    Neighbour,
    Timeline,
    Transition,
    differences,
    distance,
    filter_rows,
    near,
    nearest,
    outcome_changes,
    parse_package_filter,
    timelines,
    transitions,
)
from gpudoctor.matrix.render import grid_pictures, near_lines, near_text, outcome_summary, readme_text, show_text
from gpudoctor.matrix.schema import (
    ENV_FIELDS,
    MAX_ROW_BYTES,
    ROW_SCHEMA,
    ROWS_DIR,
    MatrixError,
    ProbeOutcome,
    Row,
    environment_key,
    fingerprint,
    load_row,
    merge,
    parse_row,
    probe_outcomes,
    row_file_name,
    row_from_report,
)
from gpudoctor.matrix.store import Added, MatrixStore, default_matrix_dir


def check_matrix(directory: Path, known_probes: set[str] | None) -> tuple[list[Row], list[str]]:
    """Every valid row in the matrix folder, and one error line for each file that breaks the schema."""
    return MatrixStore(directory).check(known_probes)


def load_matrix(directory: Path, known_probes: set[str] | None = None) -> list[Row]:
    return MatrixStore(directory).load(known_probes)


__all__ = [
    "ENV_FIELDS",
    "FIELD_WEIGHTS",
    "MAX_ROW_BYTES",
    "ROWS_DIR",
    "ROW_SCHEMA",
    "Added",
    "MatrixError",
    "MatrixStore",
    "Nearness",
    "Neighbour",
    "PinOption",
    "ProbeOutcome",
    "Row",
    "Timeline",
    "Transition",
    "check_matrix",
    "default_matrix_dir",
    "differences",
    "distance",
    "environment_key",
    "filter_rows",
    "fingerprint",
    "grid_pictures",
    "load_matrix",
    "load_row",
    "merge",
    "near",
    "near_lines",
    "near_text",
    "nearest",
    "outcome_changes",
    "outcome_summary",
    "parse_package_filter",
    "parse_row",
    "pin_options",
    "probe_outcomes",
    "readme_text",
    "row_file_name",
    "row_from_report",
    "show_text",
    "timelines",
    "transitions",
]
