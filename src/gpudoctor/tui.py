"""The interactive face: `gpudoctor` on a terminal.

The probes run in a worker thread through the same pipeline as every other face (``doctor.diagnose``);
results stream in as they finish, so the UI never waits on a probe. Everything shown that came from a
probe, a package or a matrix row is a ``rich.text.Text`` built from escaped text: markup and escape
sequences in it are displayed, never interpreted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static, TabbedContent, TabPane

from gpudoctor.atomic import atomic_write
from gpudoctor.catalog import load_catalog, run_ids
from gpudoctor.doctor import DoctorOptions, diagnose, make_report, probe_directory
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Environment, Outcome, ProbeResult, Report
from gpudoctor.render import environment_rows, safe_text, to_markdown
from gpudoctor.runner import run_probe, skipped_result
from gpudoctor.suite import PlannedRun

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_STYLES = {
    Outcome.PASS: ("pass", "green"),
    Outcome.FAIL: ("FAIL", "bold red"),
    Outcome.CRASH: ("CRASH", "bold red"),
    Outcome.TIMEOUT: ("TIMEOUT", "bold yellow"),
    Outcome.SKIPPED: ("skipped", "dim"),
}
_STDERR_LINES = 40


def plain(text: object, style: str = "") -> Text:
    """Untrusted text as a Text: control characters made visible, Rich markup left as literal characters."""
    return Text(safe_text(str(text)), style=style)


class DoctorApp(App[int]):
    """Inventory, probes by stage with live status, details, findings and the matrix, in one screen."""

    TITLE = "gpudoctor"
    CSS = """
    #left { width: 3fr; }
    #right { width: 2fr; }
    #inventory { height: auto; max-height: 40%; border: round $primary; padding: 0 1; }
    #probes { height: 1fr; border: round $primary; }
    #status { height: 1; padding: 0 1; background: $boost; }
    .pane { padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("r", "rerun_selected", "rerun selected"),
        Binding("R", "rerun_all", "rerun all"),
        Binding("j", "export_json", "export JSON"),
        Binding("m", "export_markdown", "export Markdown"),
        Binding("c", "contribute", "contribute row"),
    ]

    def __init__(
        self, options: DoctorOptions, *, export_dir: Path | None = None, matrix_dir: Path | None = None
    ) -> None:
        super().__init__()
        self.options = options
        self.export_dir = export_dir or Path.cwd()
        self.matrix_dir = matrix_dir
        self.environment: Environment | None = None
        self.planned: dict[str, PlannedRun] = {}
        self.results: dict[str, ProbeResult] = {}
        self.started: dict[str, float] = {}
        self.report: Report | None = None
        self.last_written: Path | None = None
        self._frame = 0

    # --- layout ---------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            with Vertical(id="left"):
                yield Static(Text("collecting the inventory ..."), id="inventory")
                yield DataTable(id="probes", cursor_type="row", zebra_stripes=True)
            with TabbedContent(id="right"):
                with TabPane("Details", id="details-tab"), VerticalScroll():
                    yield Static(Text("select a probe"), id="details", classes="pane")
                with TabPane("Findings", id="findings-tab"), VerticalScroll():
                    yield Static(Text("findings appear when the run ends"), id="findings", classes="pane")
                with TabPane("Matrix", id="matrix-tab"), VerticalScroll():
                    yield Static(
                        Text("rows like this environment appear when the run ends"), id="matrix", classes="pane"
                    )
        yield Static(Text("starting"), id="status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#probes", DataTable)
        for label, width in (("stage", 5), ("status", 10), ("probe", 28), ("time", 7)):
            table.add_column(label, key=label, width=width)
        table.add_column("summary", key="summary")
        self.set_interval(0.2, self._tick)
        self._start_run()

    # --- the run, in a worker thread --------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return bool(self.started) or any(w.is_running for w in self.workers if w.group == "run")

    def _start_run(self) -> None:
        self.report = None
        self.results.clear()
        self.started.clear()
        self._status("running the probes ...")
        self.run_worker(self._run_all, thread=True, group="run", exclusive=True)

    def _run_all(self) -> None:
        try:
            report = diagnose(
                self.options,
                on_plan=lambda env, planned: self.call_from_thread(self._on_plan, env, planned),
                on_start=lambda run: self.call_from_thread(self._on_start, run.run_id),
                on_result=lambda result: self.call_from_thread(self._on_result, result),
            )
        except GpuDoctorError as error:
            self.call_from_thread(self._status, error.one_line())
            return
        self.call_from_thread(self._on_report, report)

    def _on_plan(self, environment: Environment, planned: Sequence[PlannedRun]) -> None:
        self.environment = environment
        self.planned = {run.run_id: run for run in planned}
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for label, value in environment_rows(environment):
            style = "yellow" if value in ("not installed", "no NVIDIA driver") else ""
            grid.add_row(plain(label), plain(value, style))
        self.query_one("#inventory", Static).update(grid)
        table = self.query_one("#probes", DataTable)
        table.clear()
        for run in sorted(planned, key=lambda r: r.invocation.spec.stage):
            spec = run.invocation.spec
            table.add_row(
                Text(str(spec.stage)),
                Text("queued", style="dim"),
                plain(run.run_id),
                Text(""),
                plain(spec.title),
                key=run.run_id,
            )
        if not planned:
            self._status("inventory only: no probes planned")

    def _on_start(self, run_id: str) -> None:
        self.started[run_id] = time.monotonic()

    def _tick(self) -> None:
        self._frame = (self._frame + 1) % len(SPINNER)
        table = self.query_one("#probes", DataTable)
        now = time.monotonic()
        for run_id, since in list(self.started.items()):
            table.update_cell(run_id, "status", Text(f"{SPINNER[self._frame]} running", style="cyan"))
            table.update_cell(run_id, "time", Text(f"{now - since:5.1f} s"))
        if self.started:
            self._status(f"running: {', '.join(sorted(self.started))}", spinner=True)

    def _on_result(self, result: ProbeResult) -> None:
        self.started.pop(result.id, None)
        self.results[result.id] = result
        mark, style = _STYLES[result.outcome]
        table = self.query_one("#probes", DataTable)
        if result.id not in table.rows:
            return
        table.update_cell(result.id, "status", Text(mark, style=style))
        table.update_cell(result.id, "time", Text(f"{result.duration_s:5.1f} s"))
        table.update_cell(result.id, "summary", plain(result.summary))
        if self.selected_run_id() == result.id:
            self._show_details(result.id)

    def _on_report(self, report: Report) -> None:
        self.report = report
        for result in report.results:  # patched reruns and anything the stream missed
            self.results[result.id] = result
        self._show_findings(report)
        self._show_matrix(report)
        problems = sum(r.outcome.is_problem for r in report.results)
        found = sum(f.severity == "problem" for f in report.findings)
        self._status(f"done: {len(report.results)} runs, {problems} with problems, {found} problem findings")
        if (selected := self.selected_run_id()) is not None:
            self._show_details(selected)

    # --- panels -----------------------------------------------------------------------------------------

    def selected_run_id(self) -> str | None:
        table = self.query_one("#probes", DataTable)
        if table.row_count == 0:
            return None
        return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show_details(str(event.row_key.value))

    def details_text(self, run_id: str) -> Text:
        text = Text()
        run = self.planned.get(run_id)
        result = self.results.get(run_id)
        text.append(f"{run_id}\n", style="bold")
        if run is not None:
            text.append(safe_text(run.invocation.spec.title) + "\n\n", style="italic")
        if result is None:
            since = self.started.get(run_id)
            text.append(f"running for {time.monotonic() - since:.1f} s\n" if since else "queued\n")
            return text
        mark, style = _STYLES[result.outcome]
        text.append(mark, style=style)
        text.append(f"  {result.duration_s:.1f} s" + (f"  {result.signal}" if result.signal else "") + "\n")
        text.append(safe_text(result.summary) + "\n")
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
        if result.frames:
            text.append("\nPython frames (innermost first):\n", style="bold")
            for frame in result.frames:
                line = frame.line if frame.line is not None else "?"
                text.append(safe_text(f"[{frame.thread or 'main'}] {frame.file}:{line} in {frame.function}") + "\n")
        if result.details:
            text.append("\ndetails:\n", style="bold")
            for key, value in result.details.items():
                text.append(safe_text(f"{key} = {json.dumps(value, default=str)}") + "\n")
        if result.stderr_tail.strip():
            text.append("\nstderr (tail):\n", style="bold")
            text.append(safe_text("\n".join(result.stderr_tail.rstrip().splitlines()[-_STDERR_LINES:])) + "\n")
        return text

    def _show_details(self, run_id: str) -> None:
        self.query_one("#details", Static).update(self.details_text(run_id))

    def findings_text(self, report: Report) -> Text:
        if not report.findings:
            return Text("no known issue matched this run")
        text = Text()
        for finding in report.findings:
            text.append(f"{finding.severity}: ", style="bold red" if finding.severity == "problem" else "bold")
            text.append(safe_text(finding.title) + "\n", style="bold")
            for evidence in finding.evidence:
                text.append("  evidence: " + safe_text(evidence) + "\n")
            text.append(safe_text(finding.explanation) + "\n")
            text.append("fix: ", style="bold green")
            text.append(safe_text(finding.fix) + "\n")
            if finding.patch_note:
                text.append("patch: ", style="bold")
                text.append(safe_text(finding.patch_note) + "\n", style="green" if finding.patch_verified else "red")
            text.append("\n")
        return text

    def _show_findings(self, report: Report) -> None:
        self.query_one("#findings", Static).update(self.findings_text(report))

    def _known_probe_ids(self) -> set[str]:
        return run_ids(load_catalog(probe_directory(self.options)))

    def _show_matrix(self, report: Report) -> None:
        from gpudoctor import matrix

        widget = self.query_one("#matrix", Static)
        try:
            directory = matrix.default_matrix_dir(self.matrix_dir, writing=False)
            rows = matrix.load_matrix(directory)
        except GpuDoctorError as error:
            widget.update(plain(error.one_line()))
            return
        text = Text()
        for line in matrix.near_text(report, rows, self._known_probe_ids()).splitlines():
            style = "bold" if line.endswith(")") and "distance" in line else ""
            if line.strip().startswith(("differs:", "what changing")) or " here " in line:
                style = "yellow"
            text.append(safe_text(line) + "\n", style=style)
        widget.update(text)

    def _status(self, message: str, spinner: bool = False) -> None:
        prefix = f"{SPINNER[self._frame]} " if spinner else ""
        self.query_one("#status", Static).update(plain(prefix + message))

    # --- actions ----------------------------------------------------------------------------------------

    def action_rerun_all(self) -> None:
        if self.running:
            self.notify("a run is in progress", severity="warning", markup=False)
            return
        self._start_run()

    def action_rerun_selected(self) -> None:
        run_id = self.selected_run_id()
        if run_id is None or run_id not in self.planned:
            return
        if self.running:
            self.notify("a run is in progress", severity="warning", markup=False)
            return
        run = self.planned[run_id]
        self.results.pop(run_id, None)
        self.query_one("#probes", DataTable).update_cell(run_id, "status", Text("queued", style="dim"))
        self.run_worker(lambda: self._rerun(run), thread=True, group="run", exclusive=True)

    def _rerun(self, run: PlannedRun) -> None:
        self.call_from_thread(self._on_start, run.run_id)
        result = skipped_result(run.invocation, run.skip_reason) if run.skip_reason else run_probe(run.invocation)
        self.call_from_thread(self._on_result, result)
        self.call_from_thread(self._rebuild_report)

    def _rebuild_report(self) -> None:
        if self.environment is None:
            return
        ordered = [self.results[run_id] for run_id in self.planned if run_id in self.results]
        self._on_report(make_report(self.environment, ordered))

    def _export(self, name: str, text: str) -> Path | None:
        if self.report is None:
            self.notify("wait for the run to finish", severity="warning", markup=False)
            return None
        path = self.export_dir / name
        try:
            atomic_write(path, text)
        except OSError as error:
            self.notify(f"cannot write {path}: {error.strerror or error}", severity="error", markup=False)
            return None
        self.last_written = path
        self._status(f"wrote {path}")
        self.notify(f"wrote {path}", markup=False)
        return path

    def action_export_json(self) -> None:
        text = json.dumps(self.report.to_dict(), indent=2) + "\n" if self.report is not None else ""
        self._export("gpudoctor-report.json", text)

    def action_export_markdown(self) -> None:
        self._export("gpudoctor-report.md", to_markdown(self.report) if self.report is not None else "")

    def action_contribute(self) -> None:
        from gpudoctor import matrix

        if self.report is None:
            self.notify("wait for the run to finish", severity="warning", markup=False)
            return
        try:
            row = matrix.row_from_report(self.report, self._known_probe_ids())
            directory = matrix.default_matrix_dir(self.matrix_dir, writing=True)
            path, _, new = matrix.add_row(directory, row)
        except (GpuDoctorError, OSError) as error:
            message = error.one_line() if isinstance(error, GpuDoctorError) else str(error)
            self.notify(message, severity="error", markup=False)
            self._status(message)
            return
        self.last_written = path
        message = f"{'new matrix row' if new else 'merged into'} {path}; open a pull request with it"
        self._status(message)
        self.notify(message, markup=False)


def run_tui(options: DoctorOptions) -> int:
    """Run the app on this terminal; the exit status is the report's (1 if the user quit before the end)."""
    app = DoctorApp(options)
    app.run()
    return app.report.exit_code if app.report is not None else 1
