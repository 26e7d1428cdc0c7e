"""`gpudoctor fleet`: the doctor on every node of a Ray cluster, and the odd nodes out."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.cli.common import OneLineParser, file_to_write, folder_to_write, seconds
from gpudoctor.cli.kernel_command import add_call_arguments
from gpudoctor.handoff import FleetAppRequest
from gpudoctor.model import Device
from gpudoctor.process.session import stop_on_signals

if TYPE_CHECKING:
    from gpudoctor.fleet.report import FleetReport


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="gpudoctor fleet",
        description="Run the doctor on every alive node of a Ray cluster at once (one task pinned to each node; "
        "the CPU run and one run per GPU with only that GPU visible), group the nodes by environment and outcome, "
        'and name the odd ones out with what sets them apart. Needs Ray: pip install "gpudoctor[fleet]". '
        "Exit status: 0 every node healthy, 1 a problem or a node that did not answer, 2 usage error, 130/143 "
        "interrupted (nodes that answered are kept).",
    )
    parser.add_argument("--address", metavar="ADDR", help="the cluster's head, host:port (default: as Ray resolves it)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document (nodes, groups, odd ones out)")
    output.add_argument("--markdown", action="store_true", help="print a Markdown report")
    output.add_argument("--plain", action="store_true", help="plain text even on a terminal (no TUI)")
    parser.add_argument("--show-hosts", action="store_true", help="show node host names and addresses")
    parser.add_argument(
        "--contribute", action="store_true", help="merge one matrix row per group of nodes into the matrix"
    )
    parser.add_argument("--matrix", type=folder_to_write, metavar="DIR", help="the matrix for --contribute")
    parser.add_argument(
        "--junit", type=file_to_write, metavar="PATH", help="also write JUnit XML: a suite per node and GPU"
    )
    parser.add_argument("--node-timeout", type=seconds, default=1800.0, metavar="S", help="limit for each doctor run")
    passed = parser.add_argument_group("passed to the doctor on each node")
    passed.add_argument("--python", metavar="PATH", help="the interpreter to examine there (a path on the nodes)")
    passed.add_argument("--only", metavar="ID", action="append", help="run only this probe (and what it needs)")
    passed.add_argument("--device", choices=[d.value for d in (Device.CPU, Device.CUDA)], help="only this device")
    passed.add_argument("--probes", metavar="DIR", help="a probe folder (a path on the nodes)")
    passed.add_argument("--no-probes", action="store_true", help="inventory only")
    passed.add_argument("--timeout", type=seconds, metavar="S", help="override every probe's timeout")
    kernel = parser.add_argument_group("your kernel on every node (gpudoctor kernel there; paths on the nodes)")
    kernel.add_argument("--kernel", metavar="PATH", help="your Mojo package, as for gpudoctor kernel")
    add_call_arguments(kernel)
    return parser


def doctor_args(options: argparse.Namespace) -> tuple[str, ...]:
    """The arguments of the doctor each node runs: `gpudoctor ARGS`, or `gpudoctor kernel PATH ARGS`."""
    given = vars(options)
    args: list[str] = []
    if options.kernel:
        args += ["kernel", str(options.kernel)]
        for name in ("spec", "shape", "dtype", "reference"):
            if given[name]:
                args += [f"--{name}", str(given[name])]
        if options.values != "arange":  # the default
            args += ["--values", options.values]
        for name in ("op", "param"):
            for value in given[name] or ():
                args += [f"--{name}", value]
    elif any(given[name] for name in ("spec", "op", "shape", "dtype", "param", "reference")):
        from gpudoctor.errors import GpuDoctorError

        raise GpuDoctorError("--spec, --op, --shape, --dtype, --param and --reference go with --kernel PATH")
    for name in ("python", "device", "probes"):
        if given[name]:
            args += [f"--{name}", str(given[name])]
    for probe in options.only or ():
        args += ["--only", probe]
    if options.timeout:
        args += ["--timeout", f"{options.timeout:g}"]
    if options.no_probes:
        args.append("--no-probes")
    return tuple(args)


def run(argv: Sequence[str]) -> int | FleetAppRequest:
    from gpudoctor.fleet.ray_runner import FleetOptions, run_fleet
    from gpudoctor.fleet.render import fleet_markdown, fleet_text
    from gpudoctor.fleet.report import NodeRun

    options = build_parser().parse_args(argv)
    fleet_options = FleetOptions(
        address=options.address,
        doctor_args=doctor_args(options),
        node_timeout_s=options.node_timeout,
        show_hosts=options.show_hosts,
    )

    def heard(node: NodeRun) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"  {node.label}: {node.status.value} ({node.duration_s:.1f} s)\n")

    if not (options.json or options.markdown or options.plain) and sys.stdin.isatty() and sys.stdout.isatty():
        import dataclasses

        def after(tui_report: FleetReport) -> None:
            _write_junit(tui_report, options.junit)
            if options.contribute:
                _contribute(tui_report, options.matrix)

        return FleetAppRequest(dataclasses.replace(fleet_options, quiet=True), after)  # the program starts the view
    with stop_on_signals() as session:
        report = run_fleet(fleet_options, cancel=session.scope, on_node=heard)
        if options.json:
            sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
        elif options.markdown:
            sys.stdout.write(fleet_markdown(report))
        else:
            sys.stdout.write(fleet_text(report))
        sys.stdout.flush()
    if session.stopped:
        sys.stderr.write(session.note("kept the nodes that had answered; nothing recorded"))
        return session.exit_status(report.exit_code)
    _write_junit(report, options.junit)
    if options.contribute:
        _contribute(report, options.matrix)
    return report.exit_code


def _write_junit(report: FleetReport, path: Path | None) -> None:
    if path is None:
        return
    from gpudoctor.atomic import atomic_write
    from gpudoctor.fleet.report import NodeStatus
    from gpudoctor.report.junit import fleet_to_junit

    suites = [
        (node.label + (f" gpu{index - 1}" if index else ""), node_report)
        for node in report.nodes
        for index, node_report in enumerate(node.reports)
    ]
    unanswered = [(n.label, n.status.value, n.reason) for n in report.nodes if n.status is not NodeStatus.DONE]
    atomic_write(path, fleet_to_junit(suites, unanswered), mode=0o644)


def _contribute(report: FleetReport, matrix_dir: Path | None) -> None:
    """One row per group of nodes (a distinct environment and outcome), merged like `gpudoctor matrix add`."""
    from gpudoctor.fleet.report import contribution_reports
    from gpudoctor.matrix import MatrixStore, default_matrix_dir, row_from_report
    from gpudoctor.suite.catalog import default_probe_dir, load_catalog, run_ids

    store = MatrixStore(default_matrix_dir(matrix_dir, writing=True))
    known = run_ids(load_catalog(default_probe_dir()))
    for node_report in contribution_reports(report):
        added = store.add(row_from_report(node_report, known))
        what = "new row" if added.new else ("merged into" if added.counted else "already in")
        sys.stderr.write(f"gpudoctor: {what} {added.path}\n")
