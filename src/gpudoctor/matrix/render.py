"""The matrix as text: matrix/README.md (from README.template.md beside this file), `matrix show`'s table and
`matrix near`'s answer. Everything from a row is escaped for where it goes (Markdown or a terminal).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from pathlib import Path

from gpudoctor.matrix.query import (
    TIMELINE_FIELDS,
    Nearness,
    device_disagreements,
    on_cpu,
    outcome_counts,
    problems,
    timelines,
    transitions,
)
from gpudoctor.matrix.schema import ROW_SCHEMA, Row
from gpudoctor.picture import Tile, TileKind, heatmap_svg
from gpudoctor.safetext import safe_text

README_TEMPLATE = Path(__file__).with_name("README.template.md")
README_COLUMNS = ("gpu", "driver", "cuda_driver", "torch", "max", "mojo-compiler", "cuda-core", "python", "os")
SHOW_COLUMNS = ("gpu", "driver", "torch", "max", "python")


def _md(text: object) -> str:
    """A Markdown table cell: control characters visible, pipes and HTML escaped."""
    escaped = safe_text(str(text))
    for char, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("\n", " ")):
        escaped = escaped.replace(char, entity)
    return escaped


def _plain(text: object) -> str:
    return safe_text(str(text))


def outcome_summary(row: Row) -> tuple[str, str]:
    """("14 pass, 1 crash", "custom-op/cuda: crash (SIGSEGV)") for a row."""
    summary = ", ".join(f"{n} {o}" for o, n in outcome_counts(row).items())
    return summary, "; ".join(f"{p}: {label}" for p, label in problems(row)) or "none"


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text)[:4])


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower().replace("nvidia ", "")).strip("-") or "x"


def grid_pictures(rows: Sequence[Row]) -> dict[str, str]:
    """One SVG per GPU (and one for the CPU): torch across, MAX down, each tile the row's outcome. File name ->
    SVG text; `matrix readme` writes them beside README.md. Rows without torch or MAX are left out."""
    by_gpu: dict[str, list[Row]] = {}
    for row in rows:
        if "torch" in row.environment and "max" in row.environment:
            by_gpu.setdefault(row.value("gpu"), []).append(row)
    pictures = {}
    for gpu, group in sorted(by_gpu.items()):
        torches = sorted({row.value("torch") for row in group}, key=_version_key)
        maxes = sorted({row.value("max") for row in group}, key=_version_key)
        tiles: dict[tuple[str, str], Tile] = {}
        for row in sorted(group, key=lambda r: r.updated):
            trouble = problems(row)
            summary, _ = outcome_summary(row)
            if trouble:
                label = f"{len(trouble)} failing: " + ", ".join(sorted({p.split("/")[0] for p, _ in trouble}))
                tile = Tile(TileKind.PROBLEM, label, "; ".join(f"{p}: {lab}" for p, lab in trouble))
            else:
                tile = Tile(TileKind.PASS, f"pass ({len(row.results)} runs)", summary)
            tiles[(row.value("torch"), row.value("max"))] = tile  # the latest row of a cell wins
        pythons = ", ".join(sorted({row.value("python") for row in group}))
        title = f"{gpu}: the matrix rows (Python {pythons})"
        pictures[f"grid-{_slug(gpu)}.svg"] = heatmap_svg(title, torches, maxes, tiles)
    return pictures


def readme_text(rows: Sequence[Row]) -> str:
    ordered = sorted(rows, key=lambda r: r.file_name)
    table = ["| " + " | ".join(README_COLUMNS) + " | outcomes | problems | updated | file |"]
    table.append("|" + " --- |" * (len(README_COLUMNS) + 4))
    for row in ordered:
        summary, trouble = outcome_summary(row)
        cells = [_md(row.value(c)) for c in README_COLUMNS]
        cells += [_md(summary), _md(trouble), _md(row.updated), f"[{_md(row.file_name)}](rows/{row.file_name})"]
        table.append("| " + " | ".join(cells) + " |")
    sections: list[str] = []
    lines = timelines(rows)
    if lines:
        sections += ["", "## What changed across releases", ""]
        sections += ["Each line: one probe, every other key field equal, the releases in the matrix in order.", ""]
        sections += [f"- {_md(t.sentence())}" for t in lines]
    disagreements = device_disagreements(rows)
    if not all(on_cpu(r) for r in rows):
        sections += ["", "## Where the GPUs and the CPU disagree", ""]
        sections += [
            "A probe's cuda run against its cpu run in the same row, runs of one environment that did not "
            "agree, and changes along the MAX releases that no CPU row shows at the same releases.",
            "",
        ]
        sections += [f"- {_md(line)}" for line in disagreements] or [
            "- none: every change the GPU rows show, the CPU rows show at the same releases"
        ]
    found = [t for t in transitions(rows) if t.field not in TIMELINE_FIELDS]
    if found:
        sections += ["", "## What changing one thing did", ""]
        sections += [f"- {_md(t.sentence())}" for t in found]
    notes = [(r.file_name, r.note) for r in ordered if r.note]
    if notes:
        sections += ["", "## Notes", ""]
        sections += [f"- `{name}`: {_md(note)}" for name, note in notes]
    pictures = [f"![{name}]({name})" for name in grid_pictures(rows)]
    template = string.Template(README_TEMPLATE.read_text(encoding="utf-8"))
    text = template.substitute(
        row_schema=ROW_SCHEMA,  # the example row and its heading say the schema rows are written in
        count=len(rows),
        pictures="\n\n".join(pictures) or "(no rows with both torch and MAX yet)",
        table="\n".join(table),
        sections="\n".join(sections),
    )
    return text.rstrip() + "\n"


def show_text(rows: Sequence[Row]) -> str:
    """The rows as a table, then what changed across releases among them."""
    if not rows:
        return "no rows match\n"
    changes = [f"  {_plain(t.sentence())}" for t in timelines(rows)]
    footer = ["", "what changed across releases:", *changes] if changes else []
    table = [[*SHOW_COLUMNS, "outcomes", "problems"]]
    for row in sorted(rows, key=lambda r: r.file_name):
        table.append([*(row.value(c) for c in SHOW_COLUMNS), *outcome_summary(row)])
    widths = [max(len(_plain(line[i])) for line in table) for i in range(len(SHOW_COLUMNS) + 1)]
    out = []
    for line in table:
        cells = [_plain(cell).ljust(widths[i]) if i < len(widths) else _plain(cell) for i, cell in enumerate(line)]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out + footer) + "\n"


def near_lines(nearness: Nearness) -> list[tuple[str, str]]:
    """`matrix near` as (kind, line) pairs, so that a face can style by kind rather than by text: kinds are
    "here", "row", "same", "differs", "summary", "changed", "heading", "transition" and "blank"."""
    here = ", ".join(f"{k} {_plain(v)}" for k, v in nearness.environment.items())
    lines = [("here", "this environment: " + here)]
    if not nearness.neighbours:
        return [*lines, ("summary", "the matrix has no rows")]
    for n in nearness.neighbours:
        summary, trouble = outcome_summary(n.row)
        lines.append(("blank", ""))
        lines.append(("row", f"{n.row.file_name} (distance {n.distance})"))
        if n.differs:
            differs = ", ".join(f"{k} {_plain(a)} → {_plain(b)}" for k, a, b in n.differs)
            lines.append(("differs", "  differs: " + differs))
        else:
            lines.append(("same", "  same environment"))
        lines.append(("summary", f"  {summary}; problems: {_plain(trouble)}"))
        lines += [("changed", f"  {probe}: here {a}, there {b}") for probe, a, b in n.changed]
    if nearness.transitions:
        lines += [("blank", ""), ("heading", "what changing one thing did, among these rows:")]
        lines += [("transition", f"  {_plain(t.sentence())}") for t in nearness.transitions]
    return lines


def near_text(nearness: Nearness) -> str:
    return "\n".join(line for _, line in near_lines(nearness)) + "\n"
