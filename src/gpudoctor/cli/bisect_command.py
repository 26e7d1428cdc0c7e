"""`gpudoctor bisect --max A..B [options] -- CMD ARGS...`: the user's reproducer across MAX releases, searching for
where how it ends changes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from gpudoctor.cli.common import (
    OneLineParser,
    add_cell_source_arguments,
    cell_sources,
    folder_to_write,
    seconds,
    whole_number,
)
from gpudoctor.cli.run_command import split_command
from gpudoctor.errors import GpuDoctorError
from gpudoctor.process.session import stop_on_signals
from gpudoctor.safetext import safe_text


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gpudoctor bisect",
        description="Run your reproducer in one environment per MAX release (built with uv, kept between runs) and "
        "search for the releases where how it ends changes: last good, first bad, told apart from releases where "
        "it fails another way (a compile error, a missing API). Starts at --bad (default: the newest release) "
        "and halves the releases on each side, so a change costs O(log n) cells; --scan examines every release. "
        "`python` and `*.py` in the command run with each cell's interpreter; the command runs in this folder. "
        "Exit status: 0 it passes on every release examined, 1 otherwise, 2 usage error, 130/143 interrupted "
        "(finished cells are kept and shown).",
        usage="gpudoctor bisect --max A..B [options] -- CMD [ARGS ...]",
        epilog="Versions as for gpudoctor sweep (25.3..26.7, 25.4,25.5, 26.7.0). "
        'Needs uv: pip install "gpudoctor[sweep]".',
    )
    parser.add_argument("--max", metavar="VERSIONS", required=True, help="the MAX releases, e.g. 25.3..26.7")
    parser.add_argument("--torch", metavar="VERSION", help="torch of every cell (default: the one installed here)")
    parser.add_argument("--python", metavar="X.Y", help="the Python of every cell (default: this one's)")
    parser.add_argument("--bad", metavar="VERSION", help="a release where you see it fail (default: the newest)")
    parser.add_argument("--scan", action="store_true", help="examine every release, not a search")
    parser.add_argument("--parallel", type=whole_number(1, 64), default=1, metavar="N", help="cells at once")
    parser.add_argument("--timeout", type=seconds, metavar="S", default=600.0, help="limit per run (default 600 s)")
    parser.add_argument("--envs", type=folder_to_write, metavar="DIR", help="where cell environments and results live")
    parser.add_argument("--refresh", action="store_true", help="run every cell again, even if kept")
    add_cell_source_arguments(parser, "let cells use this interpreter's packages (as for sweep)")
    parser.add_argument("--ray", action="store_true", help="examine the cells on a Ray cluster's nodes")
    parser.add_argument("--address", metavar="ADDR", help="with --ray: the head")
    parser.add_argument("--no-debugger", action="store_true", help="no gdb in the cells")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document")
    output.add_argument("--markdown", action="store_true", help="print a Markdown report for a bug report")
    return parser


def _torch(option: str | None) -> str:
    if option:
        return option
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch").split("+", 1)[0]
    except PackageNotFoundError:
        raise GpuDoctorError("no torch here to take its version from: give --torch VERSION") from None


def _max_versions(spec: str, find_links: Sequence[Path], offline: bool) -> tuple[str, ...]:
    from packaging.version import Version

    from gpudoctor.sweep import grid

    chosen = grid.expand_versions(spec, "max", grid.release_lister(find_links, offline))
    return tuple(sorted(dict.fromkeys(chosen), key=Version))


def run(argv: Sequence[str]) -> int:
    from gpudoctor.reproducer.bisect_render import bisect_dict, bisect_markdown, bisect_text
    from gpudoctor.reproducer.bisect_run import BisectOptions, bisect
    from gpudoctor.reproducer.command import Reproducer
    from gpudoctor.sweep.envs import default_envs_dir, default_python, find_uv

    own, command = split_command(argv)
    options = build_parser().parse_args(own)
    find_links, offline, inherit = cell_sources(options)
    find_uv()
    versions = _max_versions(options.max, find_links, offline)
    bisect_options = BisectOptions(
        reproducer=Reproducer(argv=tuple(command), cwd=Path.cwd(), timeout_s=options.timeout,
                              debugger=not options.no_debugger),
        torch=_torch(options.torch), max_versions=versions, python=options.python or default_python(),
        envs_dir=(options.envs or default_envs_dir()).absolute(), bad=options.bad, scan=options.scan,
        parallel=options.parallel, inherit=inherit, find_links=find_links, offline=offline,
        refresh=options.refresh, ray=options.ray, address=options.address,
    )  # fmt: skip
    bisect_options.reference  # noqa: B018  (a --bad outside the range is a usage error before anything runs)

    def progress(line: str) -> None:
        sys.stderr.write(safe_text(f"  {line}") + "\n")
        sys.stderr.flush()

    with stop_on_signals() as session:  # in place while the report is printed
        report = bisect(bisect_options, on_event=progress, cancel=session.scope)
        if options.json:
            sys.stdout.write(json.dumps(bisect_dict(report), indent=2) + "\n")
        elif options.markdown:
            sys.stdout.write(bisect_markdown(report))
        else:
            sys.stdout.write(bisect_text(report))
        sys.stdout.flush()
    if session.stopped:
        sys.stderr.write(session.note("finished cells are kept"))
    return session.exit_status(report.exit_code)
