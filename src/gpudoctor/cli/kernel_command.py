"""`gpudoctor kernel PATH`: the user's own Mojo custom-op package next to the control kernel."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.cli.common import (
    OneLineParser,
    add_report_file_arguments,
    existing_file,
    existing_folder,
    positive_int,
    progress,
    run_and_report,
    seconds,
    wants_progress,
)
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Device

if TYPE_CHECKING:
    from gpudoctor.kernel.calls import CallRequest


def add_call_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The options that say which calls to make (--spec, or --op with --shape/--dtype/--param/--values), for
    `gpudoctor kernel` and for `gpudoctor sweep --kernel`; ``requests`` reads them."""
    from gpudoctor.kernel.calls import DTYPES, VALUES

    calls = parser.add_mutually_exclusive_group()
    calls.add_argument("--spec", type=existing_file, metavar="FILE", help="a TOML file of [[call]] tables")
    calls.add_argument("--op", action="append", metavar="NAME", help="call this op (repeatable)")
    parser.add_argument("--shape", metavar="AxB", help="shape of every tensor of the --op calls, e.g. 64x64")
    parser.add_argument("--dtype", choices=DTYPES, help="dtype where the signature leaves it open (default float32)")
    parser.add_argument("--param", action="append", metavar="NAME=VALUE", help="compile-time parameter (repeatable)")
    parser.add_argument("--values", choices=VALUES, default="arange", help="input values (default arange)")
    parser.add_argument(
        "--reference",
        metavar="EXPR",
        help="what the --op call's outputs should be: a Python expression over torch and x0, x1, ... (the inputs), "
        "or file.py:function; each device is judged against it",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gpudoctor kernel",
        description="Run your Mojo custom-op package through CustomOpLibrary in isolated processes, on the CPU "
        "and on each GPU, next to gpudoctor's control kernel; compare GPU results with the CPU's and point at "
        "host code that indexes device tensors. Without --op or --spec it compiles the package and lists its "
        "ops. Exit status: 0 healthy, 1 a problem found, 2 usage error, 130/143 interrupted.",
        epilog="Spec file: [[call]] tables with op, shape, dtype, parameters, values, rtol, atol and optional "
        "per-tensor outputs/inputs lists; see the gpudoctor.kernel.calls module docstring.",
    )
    parser.add_argument("package", type=Path, help="the package folder (with __init__.mojo) or a .mojopkg")
    add_call_arguments(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document")
    output.add_argument("--markdown", action="store_true", help="print a Markdown report")
    output.add_argument("--plain", action="store_true", help="plain text (the default: kernel has no TUI)")
    parser.add_argument("--python", metavar="PATH", help="the interpreter to run the kernel with")
    parser.add_argument(
        "--device", choices=[d.value for d in (Device.CPU, Device.CUDA)], action="append", help="only this device"
    )
    parser.add_argument(
        "--jobs", "-j", type=positive_int, default=None, help="processes at once (default: one per CPU)"
    )
    parser.add_argument("--timeout", type=seconds, metavar="S", help="limit for each run (default 600)")
    parser.add_argument(
        "--sanitize",
        action="store_true",
        help="on a GPU, also run the kernel and the control once each under compute-sanitizer (memcheck, initcheck)",
    )
    parser.add_argument(
        "--probes", type=existing_folder, metavar="DIR", help="a folder of probes with its catalog.toml"
    )
    add_report_file_arguments(parser)
    return parser


def requests(options: argparse.Namespace) -> tuple[CallRequest, ...]:
    from gpudoctor.kernel.calls import CallRequest, load_spec, parse_parameter, parse_reference, parse_shape

    if options.spec is not None:
        if options.shape or options.dtype or options.param or options.reference:
            raise GpuDoctorError(
                "--shape, --dtype, --param and --reference go with --op; a spec file says them per call"
            )
        return tuple(load_spec(options.spec))
    if not options.op:
        if options.shape or options.dtype or options.param or options.reference:
            raise GpuDoctorError("--shape, --dtype, --param and --reference need --op NAME")
        return ()
    if options.reference and len(options.op) > 1:
        raise GpuDoctorError(
            "--reference describes one op's outputs; with several ops give each its own in a --spec file"
        )
    shape = parse_shape(options.shape) if options.shape else None
    parameters = dict(parse_parameter(p) for p in options.param or ())
    reference = parse_reference("--reference", options.reference) if options.reference else None
    return tuple(
        CallRequest(
            op=op,
            where=f"--op {op}",
            shape=shape,
            dtype=options.dtype,
            parameters=parameters,
            values=options.values,
            reference=reference,
            shared_parameters=len(options.op) > 1,
        )
        for op in options.op
    )


def run(argv: Sequence[str]) -> int:
    from gpudoctor.doctor import DoctorOptions, default_jobs, examine
    from gpudoctor.examination import Events
    from gpudoctor.kernel.subject import KernelPackage

    options = build_parser().parse_args(argv)
    devices = tuple(Device(d) for d in options.device) if options.device else None
    subject = KernelPackage.load(
        options.package,
        requests(options),
        probe_dir=options.probes,
        devices=devices,
        timeout_s=options.timeout,
        sanitize=options.sanitize,
    )
    doctor_options = DoctorOptions(python=options.python, jobs=options.jobs or default_jobs())
    events = Events(result=progress if wants_progress(options) else None)
    return run_and_report(lambda scope: examine(subject, doctor_options, events, scope), options)
