"""The command-line face: parse options, run the doctor, print JSON, Markdown or text, set the exit code.

Exit codes: 0 every probe that ran passed; 1 a probe failed, crashed or timed out; 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor import __version__
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Device, ProbeResult, Report

if TYPE_CHECKING:
    from gpudoctor.kernelspec import CallRequest
from gpudoctor.render import safe_text

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2


PROBE_MEMORY_GIB = 1.5  # a probe process with torch and MAX loaded, measured at 0.7-1.3 GiB peak


def default_jobs() -> int:
    """Probe processes at once by default: one per CPU, at least 2, at most 16, and no more than the available
    memory holds (a probe with torch and MAX loaded takes about a GiB)."""
    jobs = max(2, min(16, os.cpu_count() or 2))
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            available_kib = next(int(line.split()[1]) for line in handle if line.startswith("MemAvailable:"))
        jobs = min(jobs, max(1, int(available_kib / (PROBE_MEMORY_GIB * 1024 * 1024))))
    except (OSError, StopIteration, ValueError):
        pass
    return jobs


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpudoctor",
        description="Check whether this GPU custom-op stack (driver, CUDA, torch, MAX, Mojo) works, "
        "and if not, what breaks. Exit status: 0 healthy, 1 a problem found, 2 usage error.",
        epilog="Your own kernels: gpudoctor kernel PATH. The compatibility matrix: gpudoctor matrix "
        "{add,check,show,near,readme}. Each has --help.",
    )
    parser.add_argument("--version", action="version", version=f"gpudoctor {__version__}")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document (for CI)")
    output.add_argument("--markdown", action="store_true", help="print a Markdown report for a bug report")
    output.add_argument("--plain", action="store_true", help="plain text even on a terminal (no TUI)")
    parser.add_argument("--python", metavar="PATH", help="the interpreter to examine (default: this one)")
    parser.add_argument("--no-probes", action="store_true", help="inventory only: run no probe")
    parser.add_argument("--only", metavar="ID", action="append", help="run only this probe (and what it needs)")
    parser.add_argument(
        "--device",
        choices=[d.value for d in (Device.CPU, Device.CUDA)],
        action="append",
        help="run only the variants for this device",
    )
    parser.add_argument(
        "--jobs", "-j", type=_positive_int, default=None, help="probes run at once (default: one per CPU, 2 to 16)"
    )
    parser.add_argument("--timeout", type=_positive_float, metavar="S", help="override every probe's timeout")
    parser.add_argument("--probes", type=Path, metavar="DIR", help="a folder of probes with its catalog.toml")
    parser.add_argument("--list", action="store_true", help="list the probes and exit")
    return parser


def build_kernel_parser() -> argparse.ArgumentParser:
    from gpudoctor.kernelspec import DTYPES, VALUES

    parser = argparse.ArgumentParser(
        prog="gpudoctor kernel",
        description="Run your Mojo custom-op package through CustomOpLibrary in isolated processes, on the CPU "
        "and on each GPU, next to gpudoctor's control kernel; compare GPU results with the CPU's and point at "
        "host code that indexes device tensors. Without --op or --spec it compiles the package and lists its "
        "ops. Exit status: 0 healthy, 1 a problem found, 2 usage error.",
        epilog="Spec file: [[call]] tables with op, shape, dtype, parameters, values, rtol, atol and optional "
        "per-tensor outputs/inputs lists; see the gpudoctor.kernelspec module docstring.",
    )
    parser.add_argument("package", type=Path, help="the package folder (with __init__.mojo) or a .mojopkg")
    calls = parser.add_mutually_exclusive_group()
    calls.add_argument("--spec", type=Path, metavar="FILE", help="a TOML file of [[call]] tables")
    calls.add_argument("--op", action="append", metavar="NAME", help="call this op (repeatable)")
    parser.add_argument("--shape", metavar="AxB", help="shape of every tensor of the --op calls, e.g. 64x64")
    parser.add_argument("--dtype", choices=DTYPES, help="dtype where the signature leaves it open (default float32)")
    parser.add_argument("--param", action="append", metavar="NAME=VALUE", help="compile-time parameter (repeatable)")
    parser.add_argument("--values", choices=VALUES, default="arange", help="input values (default arange)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document")
    output.add_argument("--markdown", action="store_true", help="print a Markdown report")
    parser.add_argument("--python", metavar="PATH", help="the interpreter to run the kernel with")
    parser.add_argument(
        "--device", choices=[d.value for d in (Device.CPU, Device.CUDA)], action="append", help="only this device"
    )
    parser.add_argument(
        "--jobs", "-j", type=_positive_int, default=None, help="processes at once (default: one per CPU)"
    )
    parser.add_argument("--timeout", type=_positive_float, metavar="S", help="limit for each run (default 600)")
    parser.add_argument("--probes", type=Path, metavar="DIR", help="a folder of probes with its catalog.toml")
    return parser


def _kernel_requests(options: argparse.Namespace) -> tuple[CallRequest, ...]:
    from gpudoctor.kernelspec import CallRequest, load_spec, parse_parameter, parse_shape

    if options.spec is not None:
        if options.shape or options.dtype or options.param:
            raise GpuDoctorError("--shape, --dtype and --param go with --op; a spec file says them per call")
        return tuple(load_spec(options.spec))
    if not options.op:
        if options.shape or options.dtype or options.param:
            raise GpuDoctorError("--shape, --dtype and --param need --op NAME")
        return ()
    shape = parse_shape(options.shape) if options.shape else None
    parameters = dict(parse_parameter(p) for p in options.param or ())
    return tuple(
        CallRequest(
            op=op,
            where=f"--op {op}",
            shape=shape,
            dtype=options.dtype,
            parameters=parameters,
            values=options.values,
            shared_parameters=len(options.op) > 1,
        )
        for op in options.op
    )


def run_kernel(argv: Sequence[str]) -> int:
    from gpudoctor.kernel import KernelOptions, diagnose_kernel

    options = build_kernel_parser().parse_args(argv)
    kernel_options = KernelOptions(
        package=options.package,
        requests=_kernel_requests(options),
        python=options.python,
        devices=tuple(Device(d) for d in options.device) if options.device else None,
        jobs=options.jobs or default_jobs(),
        timeout_s=options.timeout,
        probe_dir=options.probes,
    )
    quiet = options.json or options.markdown or not sys.stderr.isatty()
    report = diagnose_kernel(kernel_options, on_result=None if quiet else _progress)
    _emit(report, options)
    return report.exit_code


def build_matrix_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpudoctor matrix",
        description="The shared compatibility matrix (matrix/rows/*.toml): add this environment's row, check "
        "rows, show them, or find the rows nearest this environment.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--matrix", type=Path, metavar="DIR", help="the matrix folder (default: ./matrix)")

    add = commands.add_parser("add", help="record this environment's results (a run now, or --from a --json)")
    common(add)
    add.add_argument("--from", dest="source", type=Path, metavar="REPORT", help="a saved `gpudoctor --json`")
    add.add_argument("--note", help="a short plain-text note for the row")
    add.add_argument("--jobs", "-j", type=_positive_int, default=None, help="probes at once for a new run")
    add.add_argument("--python", metavar="PATH", help="the interpreter to examine for a new run")
    check = commands.add_parser("check", help="validate every row; exit 1 naming file and field")
    common(check)
    show = commands.add_parser("show", help="the rows as a table")
    common(show)
    show.add_argument("--package", action="append", default=[], metavar="SPEC", help="e.g. torch>=2.7, max==26.7.0")
    show.add_argument("--gpu", metavar="TEXT", help="rows whose GPU name contains TEXT (or cpu)")
    near = commands.add_parser("near", help="the rows closest to this environment, and what differs")
    common(near)
    near.add_argument("--from", dest="source", type=Path, metavar="REPORT", help="compare a saved --json run")
    near.add_argument("--python", metavar="PATH", help="the interpreter whose environment to compare")
    near.add_argument("--count", type=_positive_int, default=5, help="how many rows (default 5)")
    readme = commands.add_parser("readme", help="regenerate matrix/README.md from the rows")
    common(readme)
    readme.add_argument("--check", action="store_true", help="exit 1 if README.md is stale instead of writing")
    return parser


def _load_report_file(path: Path) -> Report:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Report.from_dict(data)
    except OSError as error:
        raise GpuDoctorError(f"{path}: cannot read: {error.strerror or error}") from error
    except (ValueError, KeyError, TypeError) as error:
        raise GpuDoctorError(f"{path}: not a gpudoctor --json report ({type(error).__name__}: {error})") from error


def run_matrix(argv: Sequence[str]) -> int:
    from gpudoctor import matrix
    from gpudoctor.atomic import atomic_write
    from gpudoctor.catalog import default_probe_dir, load_catalog, run_ids

    options = build_matrix_parser().parse_args(argv)
    directory = matrix.default_matrix_dir(options.matrix, writing=options.command in ("add", "readme"))
    known = run_ids(load_catalog(default_probe_dir()))
    if options.command == "check":
        rows, errors = matrix.check_matrix(directory, known)
        for line in errors:
            sys.stderr.write(safe_text(line) + "\n")
        print(f"{len(rows)} rows valid, {len(errors)} with errors in {directory}")
        return EXIT_PROBLEM if errors else EXIT_OK
    if options.command == "readme":
        text = matrix.readme_text(matrix.load_matrix(directory, known))
        target = directory / "README.md"
        if options.check:
            stale = not target.is_file() or target.read_text(encoding="utf-8") != text
            print(f"{target} is {'stale: run gpudoctor matrix readme' if stale else 'up to date'}")
            return EXIT_PROBLEM if stale else EXIT_OK
        atomic_write(target, text)
        print(f"wrote {target}")
        return EXIT_OK
    if options.command == "add":
        report = _matrix_report(options)
        row = matrix.row_from_report(report, known, note=options.note)
        path, merged, new = matrix.add_row(directory, row)
        changed = [p for p in row.results if merged.results[p].runs > 1 and merged.results[p].agreeing == 1]
        what = f"{len(row.results)} probe results" + (f", outcome changed for {', '.join(changed)}" if changed else "")
        print(f"{'new row' if new else 'merged into'} {path} ({what})")
        return EXIT_OK
    rows = matrix.load_matrix(directory, known)
    if options.command == "show":
        print(matrix.show_text(matrix.filter_rows(rows, options.package, options.gpu)), end="")
        return EXIT_OK
    own = _load_report_file(options.source) if options.source else None
    if own is None:
        from gpudoctor.doctor import make_report, resolve_python
        from gpudoctor.inventory import collect_environment

        own = make_report(collect_environment(resolve_python(options.python)))
    print(matrix.near_text(own, rows, known, options.count), end="")
    return EXIT_OK


def _matrix_report(options: argparse.Namespace) -> Report:
    if options.source is not None:
        return _load_report_file(options.source)
    from gpudoctor.doctor import DoctorOptions, diagnose

    return diagnose(DoctorOptions(python=options.python, jobs=options.jobs or default_jobs()))


def _emit(report: Report, options: argparse.Namespace) -> None:
    if options.json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    elif options.markdown:
        from gpudoctor.render import to_markdown

        sys.stdout.write(to_markdown(report))
    else:
        from gpudoctor.render import to_text

        sys.stdout.write(to_text(report))


def _progress(result: ProbeResult) -> None:
    sys.stderr.write(f"  {result.outcome.value:<8} {result.id} ({result.duration_s:.1f} s)\n")
    sys.stderr.flush()


def _list_probes(probe_dir: Path | None) -> int:
    from gpudoctor.catalog import default_probe_dir, load_catalog

    for spec in load_catalog(probe_dir or default_probe_dir()):
        devices = ",".join(d.value for d in spec.devices)
        after = f" after {','.join(spec.after)}" if spec.after else ""
        print(f"{spec.id:<28} stage {spec.stage}  [{devices}]{after}  {spec.title}")
    return EXIT_OK


def run(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["kernel"]:
        return run_kernel(argv[1:])
    if argv[:1] == ["matrix"]:
        return run_matrix(argv[1:])
    options = build_parser().parse_args(argv)
    if options.list:
        return _list_probes(options.probes)

    from gpudoctor.doctor import DoctorOptions, diagnose

    doctor_options = DoctorOptions(
        python=options.python,
        probe_dir=options.probes,
        only=tuple(options.only) if options.only else None,
        devices=tuple(Device(d) for d in options.device) if options.device else None,
        jobs=options.jobs or default_jobs(),
        timeout_s=options.timeout,
        run_probes=not options.no_probes,
    )
    if not (options.json or options.markdown or options.plain) and sys.stdin.isatty() and sys.stdout.isatty():
        from gpudoctor.tui import run_tui  # only here: the other faces never import Textual

        return run_tui(doctor_options)
    quiet = options.json or options.markdown or not sys.stderr.isatty()
    report = diagnose(doctor_options, on_result=None if quiet else _progress)
    _emit(report, options)
    return report.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except GpuDoctorError as error:
        sys.stderr.write(safe_text(error.one_line()) + "\n")
        return error.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("gpudoctor: interrupted\n")
        return 130
