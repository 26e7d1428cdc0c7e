"""The fleet view: `gpudoctor fleet` on a terminal. Nodes appear as they answer; the odd ones out are named at
the top; selecting a node shows what sets it apart and every run's outcome there.

The fleet runs in a thread worker under the app's cancel scope; `q`, Ctrl-C and SIGTERM cancel every remote
task at once (as in plain mode), and what had answered is kept for the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Footer, Header, Static

from gpudoctor.errors import GpuDoctorError
from gpudoctor.fleet.ray_runner import FleetOptions, run_fleet
from gpudoctor.fleet.render import fleet_text, odd_one_line, what_sets_apart
from gpudoctor.fleet.report import FleetReport, NodeRun, NodeStatus
from gpudoctor.model import Outcome
from gpudoctor.process.session import ExitCode, Session
from gpudoctor.safetext import safe_text
from gpudoctor.tui.widgets import plain

_STATUS_STYLES = {
    NodeStatus.DONE: "green",
    NodeStatus.LOST: "bold red",
    NodeStatus.TIMEOUT: "bold yellow",
    NodeStatus.FAILED: "bold red",
    NodeStatus.INTERRUPTED: "yellow",
}


class NodeAnswered(Message):
    def __init__(self, node: NodeRun) -> None:
        super().__init__()
        self.node = node


class FleetReady(Message):
    def __init__(self, report: FleetReport) -> None:
        super().__init__()
        self.report = report


class FleetFailed(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


def node_problems(node: NodeRun) -> str:
    bad = node.problems
    return ", ".join(bad) if bad else ("none" if node.status is NodeStatus.DONE else node.reason)


def node_details(node: NodeRun, report: FleetReport | None) -> Text:
    text = Text()
    text.append(f"{node.label}: {node.status.value} in {node.duration_s:.1f} s\n", style="bold")
    if node.host:
        text.append(safe_text(node.host) + "\n")
    if node.reason:
        text.append(safe_text(node.reason) + "\n")
    if report is not None:
        for odd in report.odd_ones:
            if odd.label == node.label:
                text.append("\nwhat sets it apart:\n", style="bold")
                text.append(safe_text(what_sets_apart(odd)) + "\n", style="yellow")
    if node.environment:
        text.append("\nenvironment:\n", style="bold")
        for key, value in node.environment.items():
            text.append(safe_text(f"  {key} = {value}") + "\n")
    if node.outcomes:
        text.append("\nruns:\n", style="bold")
        for run_id, outcome in sorted(node.outcomes.items()):
            style = "green" if outcome is Outcome.PASS else ("dim" if outcome is Outcome.SKIPPED else "bold red")
            text.append(f"  {outcome.value:<12}", style=style)  # "interrupted" is 11 long: one space after
            text.append(safe_text(run_id) + "\n")
    if node.findings:
        text.append("\nproblem findings: ", style="bold")
        text.append(", ".join(node.findings) + "\n")
    return text


class FleetApp(App[int]):
    CSS = """
    #odd { height: auto; max-height: 8; padding: 0 1; border: round $warning; }
    #nodes { width: 3fr; }
    #right { width: 2fr; padding: 0 1; }
    #fleet-status { height: 1; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]

    def __init__(self, options: FleetOptions) -> None:
        super().__init__()
        self.options = options
        self.session = Session()
        self.nodes: dict[str, NodeRun] = {}
        self.report: FleetReport | None = None
        self.running = False
        self.kept: FleetReport | None = None
        self.failure: str | None = None  # the one line of an error that ended the fleet run

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text("odd ones out appear when every node has answered"), id="odd")
        with Horizontal():
            yield DataTable(id="nodes", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="right"):
                yield Static(Text("select a node"), id="node-details")
        yield Static(Text("connecting to the cluster ..."), id="fleet-status")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "gpudoctor fleet"
        table = self.query_one("#nodes", DataTable)
        for label, width in (("node", 8), ("status", 11), ("time", 8), ("problems", 40)):
            table.add_column(label, key=label, width=width)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, lambda: self._stop("stopped by SIGTERM", ExitCode.TERMINATED))
            loop.add_signal_handler(signal.SIGINT, lambda: self._stop("stopped by SIGINT", ExitCode.INTERRUPTED))
        self.running = True
        self.run_worker(self._work, thread=True, group="fleet")

    def on_unmount(self) -> None:
        self.session.scope.cancel("the TUI closed")

    def _work(self) -> None:
        try:
            report = run_fleet(self.options, cancel=self.session.scope, on_node=self._heard)
        except GpuDoctorError as error:
            self.post_message(FleetFailed(error.one_line()))
            return
        self.post_message(FleetReady(report))

    def _heard(self, node: NodeRun) -> None:
        self.post_message(NodeAnswered(node))

    def on_node_answered(self, message: NodeAnswered) -> None:
        node = message.node
        self.nodes[node.label] = node
        table = self.query_one("#nodes", DataTable)
        row = (
            plain(node.label),
            Text(node.status.value, style=_STATUS_STYLES[node.status]),
            plain(f"{node.duration_s:.1f} s"),
            plain(node_problems(node)),
        )
        if node.label in table.rows:
            for column, value in zip(("node", "status", "time", "problems"), row, strict=True):
                table.update_cell(node.label, column, value)
        else:
            table.add_row(*row, key=node.label)
        self._say(f"{len(self.nodes)} node(s) answered ...")

    def on_fleet_ready(self, message: FleetReady) -> None:
        self.running = False
        self.report = message.report
        odd = message.report.odd_ones
        text = Text()
        if odd:
            text.append("odd ones out:\n", style="bold yellow")
            for one in odd:
                text.append(safe_text(odd_one_line(one)) + "\n")
        else:
            text.append("every node that answered has the same environment and the same outcomes", style="green")
        self.query_one("#odd", Static).update(text)
        answered = sum(n.status is NodeStatus.DONE for n in message.report.nodes)
        self._say(f"done: {len(message.report.nodes)} nodes, {answered} answered, {len(odd)} odd one(s) out")
        if (selected := self._selected()) is not None:
            self._show(selected)

    def on_fleet_failed(self, message: FleetFailed) -> None:
        self.running = False
        self.failure = message.text
        self._say(message.text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self._show(str(event.row_key.value))

    def _selected(self) -> str | None:
        table = self.query_one("#nodes", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return str(key) if key is not None else None

    def _show(self, label: str) -> None:
        if label in self.nodes:
            self.query_one("#node-details", Static).update(node_details(self.nodes[label], self.report))

    def _say(self, text: str) -> None:
        self.query_one("#fleet-status", Static).update(plain(text))

    async def action_quit(self) -> None:
        self._stop("quit", ExitCode.INTERRUPTED)

    def _stop(self, reason: str, code: int) -> None:
        interrupted = self.running
        self.session.stop(reason, code)
        result_code = self.report.exit_code if self.report is not None else ExitCode.PROBLEM
        self.exit(self.session.exit_status(result_code, cut_short=interrupted))


def run_fleet_tui(options: FleetOptions) -> tuple[int, FleetReport | None]:
    """The fleet view on this terminal: its exit status, and the report when the fleet ran to its end (quit
    mid-run, what had answered is printed after it leaves)."""
    app = FleetApp(options)
    code = app.run()
    if code in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
        for node in app.nodes.values():
            sys.stdout.write(f"  {node.label}: {node.status.value} in {node.duration_s:.1f} s: {node_problems(node)}\n")
        sys.stderr.write(app.session.note("kept the nodes that had answered"))
        return code, None
    if app.report is not None:
        sys.stdout.write(fleet_text(app.report))
    return (code if code is not None else (app.report.exit_code if app.report is not None else 1)), app.report
