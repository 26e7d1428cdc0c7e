"""`gpudoctor matrix {add,check,show,near,readme}`: the shared compatibility matrix."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudoctor.cli.common import (
    OneLineParser,
    existing_file,
    folder_to_write,
    positive_int,
    progress,
    whole_number,
)
from gpudoctor.model import Report
from gpudoctor.process.session import ExitCode, stop_on_signals
from gpudoctor.report.codec import report_id
from gpudoctor.report.files import read_report
from gpudoctor.safetext import safe_text

if TYPE_CHECKING:
    from gpudoctor.matrix import MatrixStore


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gpudoctor matrix",
        description="The shared compatibility matrix (matrix/rows/*.toml): add this environment's row, check "
        "rows, show them, or find the rows nearest this environment.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--matrix", type=folder_to_write, metavar="DIR", help="the matrix folder (default: ./matrix)")

    add = commands.add_parser("add", help="record this environment's results (a run now, or --from a --json)")
    common(add)
    add.add_argument("--from", dest="source", type=existing_file, metavar="REPORT", help="a saved `gpudoctor --json`")
    add.add_argument("--note", help="a short plain-text note for the row")
    add.add_argument("--jobs", "-j", type=positive_int, default=None, help="probes at once for a new run")
    add.add_argument("--python", metavar="PATH", help="the interpreter to examine for a new run")
    check = commands.add_parser("check", help="validate every row; exit 1 naming file and field")
    common(check)
    show = commands.add_parser("show", help="the rows as a table")
    common(show)
    show.add_argument("--package", action="append", default=[], metavar="SPEC", help="e.g. torch>=2.7, max==26.7.0")
    show.add_argument("--gpu", metavar="TEXT", help="rows whose GPU name contains TEXT (or cpu)")
    near = commands.add_parser("near", help="the rows closest to this environment, and what differs")
    common(near)
    near.add_argument("--from", dest="source", type=existing_file, metavar="REPORT", help="compare a saved --json run")
    near.add_argument("--python", metavar="PATH", help="the interpreter whose environment to compare")
    near.add_argument("--count", type=whole_number(1, 1000), default=5, help="how many rows (default 5)")
    readme = commands.add_parser("readme", help="regenerate matrix/README.md from the rows")
    common(readme)
    readme.add_argument("--check", action="store_true", help="exit 1 if README.md is stale instead of writing")
    return parser


def run(argv: Sequence[str]) -> int:
    from gpudoctor import matrix
    from gpudoctor.atomic import atomic_write
    from gpudoctor.suite.catalog import default_probe_dir, load_catalog, run_ids

    options = build_parser().parse_args(argv)
    directory = matrix.default_matrix_dir(options.matrix, writing=options.command in ("add", "readme"))
    store = matrix.MatrixStore(directory)
    known = run_ids(load_catalog(default_probe_dir()))
    if options.command == "check":
        rows, errors = store.check(known)
        for line in errors:
            sys.stderr.write(safe_text(line) + "\n")
        print(f"{len(rows)} rows valid, {len(errors)} with errors in {directory}")
        return ExitCode.PROBLEM if errors else ExitCode.OK
    if options.command == "readme":
        rows = store.load(known)
        files = {directory / "README.md": matrix.readme_text(rows)}
        files.update({directory / name: svg for name, svg in matrix.grid_pictures(rows).items()})
        if options.check:
            stale = [p for p, text in files.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
            for path in stale:
                print(f"{path} is stale: run gpudoctor matrix readme")
            if not stale:
                print(f"{directory / 'README.md'} and its {len(files) - 1} pictures are up to date")
            return ExitCode.PROBLEM if stale else ExitCode.OK
        for path, text in files.items():
            atomic_write(path, text, mode=0o644)
            print(f"wrote {path}")
        return ExitCode.OK
    if options.command == "add":
        return _add(options, store, known)
    rows = store.load(known)
    if options.command == "show":
        print(matrix.show_text(matrix.filter_rows(rows, options.package, options.gpu)), end="")
        return ExitCode.OK
    own = read_report(options.source) if options.source else None
    if own is None:
        from gpudoctor.doctor import make_report
        from gpudoctor.facts.interpreter import resolve_python
        from gpudoctor.facts.inventory import collect_environment

        own = make_report(collect_environment(resolve_python(options.python)))
    print(matrix.near_text(matrix.near(own, rows, known, options.count)), end="")
    return ExitCode.OK


def _add(options: argparse.Namespace, store: MatrixStore, known: set[str]) -> int:
    from gpudoctor import matrix

    report = read_report(options.source) if options.source is not None else _run_now(options)
    if isinstance(report, int):
        return report
    row = matrix.row_from_report(report, known, note=options.note)
    added = store.add(row)
    if not added.counted:
        print(f"already in {added.path}: report {report_id(report)} was recorded before; nothing changed")
        return ExitCode.OK
    merged = added.row
    changed = [p for p in row.results if merged.results[p].runs > 1 and merged.results[p].agreeing == 1]
    what = f"{len(row.results)} probe results" + (f", outcome changed for {', '.join(changed)}" if changed else "")
    print(f"{'new row' if added.new else 'merged into'} {added.path} ({what})")
    return ExitCode.OK


def _run_now(options: argparse.Namespace) -> Report | int:
    """A fresh run to record, or the exit status when it was interrupted (a partial run is never recorded)."""
    from gpudoctor.doctor import DoctorOptions, default_jobs, examine
    from gpudoctor.examination import Events
    from gpudoctor.process.cancel import Cancelled
    from gpudoctor.subject import ProbeSuite

    doctor_options = DoctorOptions(python=options.python, jobs=options.jobs or default_jobs())
    events = Events(result=progress if sys.stderr.isatty() else None)
    with stop_on_signals() as session:
        try:
            report: Report | None = examine(ProbeSuite(), doctor_options, events, session.scope)
        except Cancelled:
            report = None
    if report is None or session.stopped:
        sys.stderr.write(session.note("nothing recorded"))
        return session.exit_status(ExitCode.INTERRUPTED)
    return report
