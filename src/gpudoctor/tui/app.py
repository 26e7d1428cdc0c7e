"""The interactive app: `gpudoctor` on a terminal.

The work (examining its subject: the probes or a user's command; a rerun) goes through the same pipeline as every
other face (``doctor.examine`` and ``doctor.rerun``) in a Textual thread worker, under a child of the app's cancel
scope; progress comes back as messages (gpudoctor.tui.messages), so the UI never waits on a probe. Quitting (q, the
window closing, SIGTERM) cancels the scope: every running probe's process group is killed at once and the app exits
without waiting for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult, ScreenStackError
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Footer, Header, TabbedContent, TabPane
from textual.worker import Worker, WorkerState

from gpudoctor.atomic import atomic_write
from gpudoctor.doctor import DoctorOptions, dependents, examine, make_report, probe_directory, rerun, suite_of
from gpudoctor.errors import GpuDoctorError
from gpudoctor.examination import Events
from gpudoctor.model import Environment, Outcome, ProbeResult, Report
from gpudoctor.process.cancel import CancelScope
from gpudoctor.process.session import ExitCode, Session
from gpudoctor.report.codec import encode
from gpudoctor.report.files import ReportFiles
from gpudoctor.report.text import to_markdown, to_text
from gpudoctor.subject import Subject
from gpudoctor.suite.catalog import load_catalog, run_ids
from gpudoctor.suite.plan import PlannedRun
from gpudoctor.suite.runner import interrupted_result
from gpudoctor.tui.messages import ReportReady, RunEnded, RunPlanned, RunStarted, WorkFailed
from gpudoctor.tui.widgets import (
    SPINNER,
    DetailsPane,
    FindingsPane,
    InventoryPane,
    MatrixPane,
    ProbeTable,
    StatusLine,
    details_text,
)


class DoctorApp(App[int]):
    """Inventory, probes by stage with live status, details, findings and the matrix, in one screen."""

    TITLE = "gpudoctor"
    CSS_PATH = "doctor.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),  # as everywhere else, not Textual's hint
        Binding("r", "rerun_selected", "rerun selected"),
        Binding("R", "rerun_all", "rerun all"),
        Binding("j", "export_json", "export JSON"),
        Binding("m", "export_markdown", "export Markdown"),
        Binding("c", "contribute", "contribute row"),
    ]

    def __init__(
        self,
        options: DoctorOptions,
        *,
        export_dir: Path | None = None,
        matrix_dir: Path | None = None,
        subject: Subject | None = None,
    ) -> None:
        super().__init__()
        self.options = options
        self.subject = subject if subject is not None else suite_of(options)  # default: the probes options select
        self.export_dir = export_dir or Path.cwd()
        self.matrix_dir = matrix_dir
        self.session = Session()  # stopped when the app goes: every probe of every run with it
        self.environment: Environment | None = None
        self.planned: dict[str, PlannedRun] = {}
        self.results: dict[str, ProbeResult] = {}
        self.started: dict[str, float] = {}
        self.report: Report | None = None
        self.last_written: Path | None = None
        self.running = False
        self.interrupted = False  # quit while work was running
        self.kept: Report | None = None  # what had ended when quit mid-run
        self._scopes: dict[Worker[None], CancelScope] = {}
        self._frame = 0

    # --- layout -----------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            with Vertical(id="left"):
                yield InventoryPane(Text("collecting the inventory ..."), id="inventory")
                yield ProbeTable(id="probes", cursor_type="row", zebra_stripes=True)
            with TabbedContent(id="right"):
                with TabPane("Details", id="details-tab"), VerticalScroll():
                    yield DetailsPane(Text("select a probe"), id="details", classes="pane")
                with TabPane("Findings", id="findings-tab"), VerticalScroll():
                    yield FindingsPane(Text("findings appear when the run ends"), id="findings", classes="pane")
                with TabPane("Matrix", id="matrix-tab"), VerticalScroll():
                    yield MatrixPane(
                        Text("rows like this environment appear when the run ends"), id="matrix", classes="pane"
                    )
        yield StatusLine(Text("starting"), id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(0.2, self._tick)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, self._terminate)
            loop.add_signal_handler(signal.SIGINT, self._interrupt)  # kill -INT from outside the terminal
        self._start_run()

    def on_unmount(self) -> None:
        self.session.scope.cancel("the TUI closed")
        with contextlib.suppress(NotImplementedError, RuntimeError):
            for sig in (signal.SIGTERM, signal.SIGINT):
                asyncio.get_running_loop().remove_signal_handler(sig)

    @property
    def table(self) -> ProbeTable:
        return self.query_one("#probes", ProbeTable)

    def selected_run_id(self) -> str | None:
        return self.table.selected_run_id()

    def details_text(self, run_id: str) -> Text:
        return details_text(run_id, self.planned.get(run_id), self.results.get(run_id), self.started.get(run_id))

    # --- work, in a thread worker under a child of the session's cancel scope -----------------------------

    def _events(self) -> Events:
        return Events(plan=self._planned, start=self._started, result=self._ended)

    def _planned(self, environment: Environment, planned: Sequence[PlannedRun]) -> None:
        self.post_message(RunPlanned(environment, planned))

    def _started(self, run: PlannedRun) -> None:
        self.post_message(RunStarted(run.run_id))

    def _ended(self, result: ProbeResult) -> None:
        self.post_message(RunEnded(result))

    def _launch(self, work: Callable[[CancelScope], Report]) -> None:
        self.running = True
        scope = self.session.scope.child()
        worker = self.run_worker(partial(self._work, work, scope), thread=True, group="run", exclusive=True)
        self._scopes[worker] = scope

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Cancelling the worker (Textual does on exit, or for an exclusive newcomer) cancels its probes: a
        thread cannot be interrupted, but its probes can, and then the thread returns at once."""
        if event.state in (WorkerState.CANCELLED, WorkerState.ERROR, WorkerState.SUCCESS):
            scope = self._scopes.pop(event.worker, None)
            if scope is not None and event.state is WorkerState.CANCELLED:
                scope.cancel("the run was cancelled")

    def _work(self, work: Callable[[CancelScope], Report], scope: CancelScope) -> None:
        try:
            report = work(scope)
        except GpuDoctorError as error:
            self.post_message(WorkFailed(error.one_line()))
            return
        self.post_message(ReportReady(report))

    def _start_run(self) -> None:
        self.report = None
        self.results.clear()
        self.started.clear()
        self._say(f"running {self.subject.title} ...")
        self._launch(lambda scope: examine(self.subject, self.options, self._events(), scope))

    # --- messages from the work ---------------------------------------------------------------------------

    def on_run_planned(self, message: RunPlanned) -> None:
        self.environment = message.environment
        self.planned = {run.run_id: run for run in message.planned}
        self.query_one("#inventory", InventoryPane).show(message.environment)
        self.table.show_plan(message.planned, self.results)
        early = make_report(message.environment)  # pre-flight findings: known before any probe ends
        if early.findings and self.report is None:
            self.query_one("#findings", FindingsPane).show(early)
        if not self.options.run_probes:
            self._say("inventory only: no probes planned")

    def on_run_started(self, message: RunStarted) -> None:
        self.started[message.run_id] = message.at

    def on_run_ended(self, message: RunEnded) -> None:
        result = message.result
        self.started.pop(result.id, None)
        kept = self.results.get(result.id)
        if result.patched and kept is not None and kept.outcome is not Outcome.SKIPPED:
            self.table.show_result(kept)  # a patch's verifying rerun: the row shows the stack as it is again
            return
        self.results[result.id] = result
        self.table.show_result(result)
        if self.selected_run_id() == result.id:
            self._show_details(result.id)

    def on_report_ready(self, message: ReportReady) -> None:
        report = message.report
        self.running = False
        self.report = report
        self.started.clear()
        for result in report.results:  # what the stream did not carry: results kept by a rerun
            self.results[result.id] = result
            self.table.show_result(result)
        self.query_one("#findings", FindingsPane).show(report)
        self._show_matrix(report)
        counts = f"{report.problem_runs} with problems, {report.problem_findings} problem findings"
        self._say(f"done: {len(report.results)} runs, {counts}")
        if (selected := self.selected_run_id()) is not None:
            self._show_details(selected)

    def on_work_failed(self, message: WorkFailed) -> None:
        self.running = False
        self.started.clear()
        self._say(message.text)

    def on_data_table_row_highlighted(self, event: ProbeTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show_details(str(event.row_key.value))

    # --- panels -------------------------------------------------------------------------------------------

    def _tick(self) -> None:
        self._frame = (self._frame + 1) % len(SPINNER)
        try:
            table = self.table
        except (NoMatches, ScreenStackError):
            return  # a last tick while the app closes: the table is already gone
        table.show_running(self.started, self._frame)
        if self.started:
            self._say(f"running: {', '.join(sorted(self.started))}", spinner=True)

    def _show_details(self, run_id: str) -> None:
        self.query_one("#details", DetailsPane).show(
            run_id, self.planned.get(run_id), self.results.get(run_id), self.started.get(run_id)
        )

    def _known_probe_ids(self) -> set[str]:
        return run_ids(load_catalog(probe_directory(self.options)))

    def _show_matrix(self, report: Report) -> None:
        from gpudoctor import matrix

        pane = self.query_one("#matrix", MatrixPane)
        try:
            store = matrix.MatrixStore(matrix.default_matrix_dir(self.matrix_dir, writing=False))
            pane.show(matrix.near(report, store.load(), self._known_probe_ids()))
        except GpuDoctorError as error:
            pane.show_error(error.one_line())

    def _say(self, message: str, spinner: bool = False) -> None:
        self.query_one("#status", StatusLine).say(message, self._frame if spinner else None)

    def _warn(self, message: str) -> None:
        self.notify(message, severity="warning", markup=False)

    # --- actions ------------------------------------------------------------------------------------------

    async def action_quit(self) -> None:
        self._stop("quit", ExitCode.INTERRUPTED)

    def _terminate(self) -> None:
        self._stop("stopped by SIGTERM", ExitCode.TERMINATED)

    def partial_report(self, reason: str) -> Report | None:
        """The report of what had ended, the rest marked interrupted (None before the inventory was in)."""
        if self.environment is None:
            return None
        results = [
            self.results.get(run_id) or interrupted_result(run.invocation, reason)
            for run_id, run in self.planned.items()
        ]  # and what ended without being planned (a user's command): nothing, when it was still running
        results += [result for run_id, result in self.results.items() if run_id not in self.planned]
        return make_report(self.environment, results)

    def _interrupt(self) -> None:
        self._stop("stopped by SIGINT", ExitCode.INTERRUPTED)

    def _stop(self, reason: str, interrupted_code: int) -> None:
        """Kill every running probe now and leave; the exit status says whether work was cut short, and what
        had ended is kept (``kept``) for the terminal once the app has gone."""
        self.interrupted = self.running
        self.session.stop(reason, interrupted_code)
        if self.interrupted:
            self.kept = self.partial_report(reason)
        result_code = self.report.exit_code if self.report is not None else ExitCode.PROBLEM
        self.exit(self.session.exit_status(result_code, cut_short=self.interrupted))

    def action_rerun_all(self) -> None:
        if self.running:
            self._warn("a run is in progress")
            return
        self._start_run()

    def action_rerun_selected(self) -> None:
        run_id = self.selected_run_id()
        if run_id is None or run_id not in self.planned:
            return
        if self.running or self.report is None:
            self._warn("a run is in progress")
            return
        report = self.report
        again = dependents(list(self.planned.values()), [run_id])
        for rerun_id in again:
            self.results.pop(rerun_id, None)
        self.table.show_queued(again)
        self._say(f"rerunning {', '.join(again)} ...")
        events = self._events()
        self._launch(
            lambda scope: rerun(
                self.options, report, [run_id], on_start=events.start, on_result=events.result, cancel=scope
            )
        )

    def _export(self, name: str, text: str) -> Path | None:
        if self.report is None:
            self._warn("wait for the run to finish")
            return None
        path = self.export_dir / name
        try:
            atomic_write(path, text)
        except OSError as error:
            self.notify(f"cannot write {path}: {error.strerror or error}", severity="error", markup=False)
            return None
        self.last_written = path
        self._say(f"wrote {path}")
        self.notify(f"wrote {path}", markup=False)
        return path

    def action_export_json(self) -> None:
        text = json.dumps(encode(self.report), indent=2) + "\n" if self.report is not None else ""
        self._export("gpudoctor-report.json", text)

    def action_export_markdown(self) -> None:
        self._export("gpudoctor-report.md", to_markdown(self.report) if self.report is not None else "")

    def action_contribute(self) -> None:
        from gpudoctor import matrix

        if self.report is None:
            self._warn("wait for the run to finish")
            return
        try:
            row = matrix.row_from_report(self.report, self._known_probe_ids())
            store = matrix.MatrixStore(matrix.default_matrix_dir(self.matrix_dir, writing=True))
            added = store.add(row)
        except GpuDoctorError as error:
            self.notify(error.one_line(), severity="error", markup=False)
            self._say(error.one_line())
            return
        self.last_written = added.path
        if not added.counted:
            message = f"already in {added.path}: this run was recorded before"
        else:
            message = f"{'new matrix row' if added.new else 'merged into'} {added.path}; open a pull request with it"
        self._say(message)
        self.notify(message, markup=False)


def run_tui(subject: Subject, options: DoctorOptions, files: ReportFiles | None = None) -> int:
    """Run the app on this terminal, examining ``subject``. Exit status: the report's; 130 when quit (143 on
    SIGTERM) mid-run, and then what had ended is printed on the terminal the app leaves behind."""
    app = DoctorApp(options, subject=subject)
    code = app.run()
    finished = app.kept if app.kept is not None else app.report
    if files is not None and finished is not None:
        files.write(finished)  # --junit, --save-json, --save-markdown, as in plain mode
    if app.kept is not None:
        sys.stdout.write(to_text(app.kept))
        sys.stdout.flush()
        sys.stderr.write(app.session.note())
    if code is not None:
        return code
    return app.report.exit_code if app.report is not None else 1
