"""The TUI's widgets, each rendering one kind of data: the inventory, the probe table, a run's details,
the findings, the nearest matrix rows and the status line.

Everything shown that came from a probe, a package or a matrix row is a ``rich.text.Text`` built from escaped
text: markup and escape sequences in it are displayed, never interpreted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence

from rich.table import Table
from rich.text import Text
from textual.widgets import DataTable, Static

from gpudoctor.matrix import Nearness, near_lines
from gpudoctor.model import Environment, Outcome, ProbeResult, Report
from gpudoctor.protocol import OWN_RUN_IDS
from gpudoctor.report.text import cost_line, environment_rows, where_it_died
from gpudoctor.safetext import safe_text
from gpudoctor.suite.plan import PlannedRun

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
OUTCOME_STYLES = {  # the colour of each outcome's word (Outcome.word)
    Outcome.PASS: "green",
    Outcome.FAIL: "bold red",
    Outcome.CRASH: "bold red",
    Outcome.TIMEOUT: "bold yellow",
    Outcome.SKIPPED: "dim",
    Outcome.INTERRUPTED: "yellow",
}
_NEAR_STYLES = {"row": "bold", "differs": "yellow", "changed": "yellow", "here": "italic", "heading": "bold"}
STDERR_LINES = 40


def plain(text: object, style: str = "") -> Text:
    """Untrusted text as a Text: control characters made visible, Rich markup left as literal characters."""
    return Text(safe_text(str(text)), style=style)


class InventoryPane(Static):
    """The environment the inventory found."""

    def show(self, environment: Environment) -> None:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for label, value in environment_rows(environment):
            style = "yellow" if value in ("not installed", "no NVIDIA driver") else ""
            grid.add_row(plain(label), plain(value, style))
        self.update(grid)


class ProbeTable(DataTable[Text]):
    """One row per planned run, by stage, with live status and time."""

    COLUMNS = (("stage", 5), ("status", 11), ("probe", 28), ("time", 7))

    def on_mount(self) -> None:
        for label, width in self.COLUMNS:
            self.add_column(label, key=label, width=width)
        self.add_column("summary", key="summary")

    def show_plan(self, planned: Sequence[PlannedRun], results: Mapping[str, ProbeResult]) -> None:
        """The planned runs; those with a result already (kept by a rerun) show it."""
        self.clear()
        for run in sorted(planned, key=lambda r: r.invocation.spec.stage):
            spec = run.invocation.spec
            self.add_row(
                Text(str(spec.stage)),
                Text("queued", style="dim"),
                plain(run.run_id),
                Text(""),
                plain(spec.title),
                key=run.run_id,
            )
            if run.run_id in results:
                self.show_result(results[run.run_id])

    def show_running(self, running: Mapping[str, float], frame: int) -> None:
        now = time.monotonic()
        for run_id, since in running.items():
            if run_id in self.rows:
                self.update_cell(run_id, "status", Text(f"{SPINNER[frame]} running", style="cyan"))
                self.update_cell(run_id, "time", Text(f"{now - since:5.1f} s"))

    def show_queued(self, run_ids: Sequence[str]) -> None:
        for run_id in run_ids:
            if run_id in self.rows:
                self.update_cell(run_id, "status", Text("queued", style="dim"))

    def show_result(self, result: ProbeResult) -> None:
        if result.id not in self.rows:
            if result.probe not in OWN_RUN_IDS:
                return
            # `gpudoctor run` and `explain`: the user's command or log is the one run, not planned from the catalog
            self.add_row(Text("-"), Text(""), plain(result.id), Text(""), plain(result.command), key=result.id)
        self.update_cell(result.id, "status", Text(result.outcome.word, style=OUTCOME_STYLES[result.outcome]))
        self.update_cell(result.id, "time", Text(f"{result.duration_s:5.1f} s"))
        self.update_cell(result.id, "summary", plain(result.summary))

    def selected_run_id(self) -> str | None:
        if self.row_count == 0:
            return None
        return str(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)


def details_text(run_id: str, run: PlannedRun | None, result: ProbeResult | None, since: float | None) -> Text:
    """Everything about one run: outcome, summary, reproduce command, frames, details, stderr."""
    text = Text()
    text.append(f"{run_id}\n", style="bold")
    if run is not None:
        text.append(safe_text(run.invocation.spec.title) + "\n\n", style="italic")
    if result is None:
        text.append(f"running for {time.monotonic() - since:.1f} s\n" if since else "queued\n")
        return text
    text.append(result.outcome.word, style=OUTCOME_STYLES[result.outcome])
    text.append(f"  {result.duration_s:.1f} s" + (f"  {result.signal}" if result.signal else "") + "\n")
    text.append(safe_text(result.summary) + "\n")
    if (cost := cost_line(result)) is not None:
        text.append("cost: ", style="bold")
        text.append(cost + "\n")
    for label, value in (
        ("last step", result.last_step),
        ("exception", result.exception_type),
        ("skipped because", result.skip_reason),
    ):
        if value:
            text.append(f"{label}: ", style="bold")
            text.append(safe_text(value) + "\n")
    text.append("\nreproduce:\n", style="bold")
    text.append(safe_text(result.command) + "\n")
    if result.native is not None or result.mapped_libraries:
        text.append("\nwhere it died:\n", style="bold")
        for died in where_it_died(result):
            text.append(safe_text(died) + "\n")
    elif result.frames:
        text.append("\nPython frames (innermost first):\n", style="bold")
        for frame in result.frames:
            line = frame.line if frame.line is not None else "?"
            text.append(safe_text(f"[{frame.thread or 'main'}] {frame.file}:{line} in {frame.function}") + "\n")
    if result.steps:
        text.append("\nwhere the time went (start, duration):\n", style="bold")
        for step in result.steps:
            text.append(safe_text(f"{step.start_s:6.1f} s {step.duration_s:6.1f} s  {step.name}") + "\n")
    if result.details:
        text.append("\ndetails:\n", style="bold")
        for key, value in result.details.items():
            text.append(safe_text(f"{key} = {json.dumps(value, default=str)}") + "\n")
    if result.stderr_tail.strip():
        text.append("\nstderr (tail):\n", style="bold")
        text.append(safe_text("\n".join(result.stderr_tail.rstrip().splitlines()[-STDERR_LINES:])) + "\n")
    return text


class DetailsPane(Static):
    def show(self, run_id: str, run: PlannedRun | None, result: ProbeResult | None, since: float | None) -> None:
        self.update(details_text(run_id, run, result, since))


def findings_text(report: Report) -> Text:
    if not report.findings:
        return Text("no known issue matched this run")
    text = Text()
    for finding in report.findings:
        if finding.part_of is not None:
            continue  # said inside the finding it supports or follows from (knowledge.verdict)
        text.append(f"{finding.severity}: ", style="bold red" if finding.is_problem else "bold")
        text.append(safe_text(finding.title) + "\n", style="bold")
        supports, follows = report.parts_of(finding)
        for evidence in dict.fromkeys([*finding.evidence, *(e for f in supports for e in f.evidence)]):
            text.append("  evidence: " + safe_text(evidence) + "\n")
        for consequence in follows:
            text.append("  consequence: " + safe_text(consequence.title) + "\n")
        text.append(safe_text(finding.explanation) + "\n")
        text.append("fix: ", style="bold green")
        text.append(safe_text(finding.fix) + "\n")
        if finding.patch_note:
            text.append("patch: ", style="bold")
            text.append(safe_text(finding.patch_note) + "\n", style="green" if finding.patch_verified else "red")
        text.append("\n")
    return text


class FindingsPane(Static):
    def show(self, report: Report) -> None:
        self.update(findings_text(report))


class MatrixPane(Static):
    """The matrix rows nearest this environment, styled by what each line is."""

    def show(self, nearness: Nearness) -> None:
        text = Text()
        for kind, line in near_lines(nearness):
            text.append(safe_text(line) + "\n", style=_NEAR_STYLES.get(kind, ""))
        self.update(text)

    def show_error(self, message: str) -> None:
        self.update(plain(message))


class StatusLine(Static):
    def say(self, message: str, frame: int | None = None) -> None:
        prefix = f"{SPINNER[frame]} " if frame is not None else ""
        self.update(plain(prefix + message))
