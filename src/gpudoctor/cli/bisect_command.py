"""`gpudoctor bisect --max A..B | --package NAME A..B [options] -- CMD ARGS...`: the user's reproducer across MAX
releases (torch x MAX cells) or any distribution's (over the examined environment), searching for where how it ends
changes."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

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
        description="Run your reproducer in one environment per release — of MAX, or of any distribution with "
        "--package (built with uv, kept between runs) — and "
        "search for the releases where how it ends changes: last good, first bad, told apart from releases where "
        "it fails another way (a compile error, a missing API). Starts at --bad (default: the newest release) "
        "and halves the releases on each side, so a change costs O(log n) cells; --scan examines every release. "
        "`python` and `*.py` in the command run with each cell's interpreter; the command runs in this folder. "
        "Exit status: 0 it passes on every release examined, 1 otherwise, 2 usage error, 130/143 interrupted "
        "(finished cells are kept and shown).",
        usage="gpudoctor bisect (--max A..B | --package NAME A..B) [options] -- CMD [ARGS ...]",
        epilog="--max versions as for gpudoctor sweep (25.3..26.7, 25.4,25.5, 26.7.0). --package NAME A..B: every "
        "release of NAME from A to B (B=3.5: the whole 3.5 line) as uv sees your indexes (your uv configuration, "
        "--find-links, --offline); each cell is the environment of --python with every other distribution at its "
        "installed version and NAME at the release under test, installed as pip would (over what the others "
        "declare: uv's overrides); the verdict names each declared requirement the failing releases break. "
        'Needs uv: pip install "gpudoctor[sweep]".',
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--max", metavar="VERSIONS", help="the MAX releases, e.g. 25.3..26.7 (torch x MAX cells)")
    what.add_argument("--package", nargs=2, metavar=("NAME", "A..B"), help="the releases of any distribution")
    parser.add_argument("--torch", metavar="VERSION", help="with --max: torch of every cell (default: the one here)")
    parser.add_argument(
        "--python",
        metavar="X.Y|PATH",
        help="with --max: the Python of every cell (default: this one's); with --package: the interpreter whose "
        "environment the cells copy (default: the one gpudoctor runs with)",
    )
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


def _range(spec: str, package: str) -> tuple[Version, Version]:
    """``A..B`` as the lowest and highest version wanted (B of fewer than three parts: the end of its line)."""
    from gpudoctor.sweep.grid import line_end

    low_text, dots, high_text = spec.partition("..")
    if not dots or not low_text.strip() or not high_text.strip():
        raise GpuDoctorError(f"--package {package} {spec}: give a range of releases A..B, e.g. 3.2.0..3.5")
    try:
        low, high = (Version(Version(text.strip()).public) for text in (low_text, high_text))  # 2.6.0+cpu: 2.6.0
    except InvalidVersion:
        raise GpuDoctorError(f"--package {package} {spec}: not a range of versions A..B") from None
    if low > high:
        raise GpuDoctorError(f"--package {package} {spec}: the range runs backwards")
    return low, (line_end(high) if len(high.release) < 3 else high)


def _pinned_cells(options: argparse.Namespace, find_links: Sequence[Path], offline: bool) -> dict[str, Any]:
    """A package bisect's releases and environment: what --python has installed, pinned, less the package."""
    from gpudoctor.facts.interpreter import ask, check_cpython, resolve_python
    from gpudoctor.sweep.pinned import frozen_environment, releases_between

    name, spec = options.package
    if options.torch is not None or options.inherit is not None:
        given = "--torch" if options.torch is not None else "--inherit"
        raise GpuDoctorError(f"{given} is for --max; with --package every cell has what --python has installed")
    if options.python is not None and re.fullmatch(r"\d+\.\d+", options.python):
        raise GpuDoctorError(f"--python {options.python}: with --package, give the interpreter whose environment "
                             "the cells copy (a path), not a version")  # fmt: skip
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name):
        raise GpuDoctorError(f"--package {name!r}: not a distribution name")
    low, high = _range(spec, name)
    python = resolve_python(options.python)
    answer = ask(python, "import json, platform; print(json.dumps({'implementation': platform.python_implementation(),"
                         " 'python': platform.python_version()}))")  # fmt: skip
    check_cpython(python, answer)
    versions = releases_between(name, low, high, python=python, find_links=find_links, offline=offline)
    pins = frozen_environment(python, leave_out=name)
    return {"package": name, "versions": tuple(versions), "pins": pins, "torch": "",
            "python": ".".join(str(answer["python"]).split(".")[:2])}  # fmt: skip


def run(argv: Sequence[str]) -> int:
    from gpudoctor.reproducer.bisect_render import bisect_dict, bisect_markdown, bisect_text
    from gpudoctor.reproducer.bisect_run import BisectOptions, bisect
    from gpudoctor.reproducer.command import Reproducer
    from gpudoctor.sweep.envs import default_envs_dir, default_python, find_uv

    own, command = split_command(argv)
    options = build_parser().parse_args(own)
    find_links, offline, inherit = cell_sources(options)
    find_uv()
    if options.package is not None:
        cells = _pinned_cells(options, find_links, offline)
    else:
        cells = {"versions": _max_versions(options.max, find_links, offline), "torch": _torch(options.torch),
                 "python": options.python or default_python()}  # fmt: skip
    bisect_options = BisectOptions(
        reproducer=Reproducer(argv=tuple(command), cwd=Path.cwd(), timeout_s=options.timeout,
                              debugger=not options.no_debugger),
        **cells, envs_dir=(options.envs or default_envs_dir()).absolute(), bad=options.bad, scan=options.scan,
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
