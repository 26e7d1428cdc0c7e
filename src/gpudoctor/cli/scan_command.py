"""`gpudoctor scan PATH`: the version-aware source check of a kernel package or Python project, against the
installed MAX (or --max), cuda-python and cuda-core; no compiler, no imports, no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gpudoctor.cli.common import OneLineParser
from gpudoctor.errors import GpuDoctorError
from gpudoctor.safetext import safe_text


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gpudoctor scan",
        description="Find the lines of Mojo kernels and Python code that the installed MAX, cuda-python or "
        "cuda-core do not accept (or do not accept yet), each with the release that changed it and the rewrite; "
        "estimate which MAX release the code was written for. Exit status: 0 nothing to change, 1 lines to "
        "change, 2 usage error.",
    )
    parser.add_argument("path", type=Path, help="a folder (every .mojo and .py under it) or one file")
    parser.add_argument("--max", metavar="VERSION", help="check against this MAX release instead of the installed one")
    parser.add_argument("--python", metavar="PATH", help="the interpreter whose packages count as installed")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print one JSON document")
    output.add_argument("--markdown", action="store_true", help="print Markdown (for a bug report)")
    return parser


def run(argv: Sequence[str]) -> int:
    from packaging.version import InvalidVersion, Version

    from gpudoctor.facts.interpreter import resolve_python
    from gpudoctor.facts.inventory import package_versions
    from gpudoctor.kernel.source.check import check_source
    from gpudoctor.kernel.source.render import run_there_command, source_markdown, source_text
    from gpudoctor.kernel.source.rules import shipped_rules

    options = build_parser().parse_args(argv)
    options.path = Path(os.path.abspath(options.path))
    if not options.path.exists():
        raise GpuDoctorError(f"{options.path}: no such file or directory")
    if not options.path.is_dir() and not options.path.is_file():
        raise GpuDoctorError(f"{options.path}: not a folder or a regular file")
    if options.max is not None:
        try:
            Version(options.max)
        except InvalidVersion:
            raise GpuDoctorError(f"--max {options.max!r}: not a version like 26.7.0") from None
    python = resolve_python(options.python)
    installed = package_versions(python, (*shipped_rules().packages, "torch"))
    torch = installed.pop("torch", None)
    if options.max is not None:
        installed["max"] = options.max
    check = check_source(options.path.absolute(), installed)
    if options.json:
        document = {
            "path": options.path.name,
            **check.to_dict(),
            "run_there": run_there_command(check, options.path, torch),
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    elif options.markdown:
        sys.stdout.write(safe_text(source_markdown(check, options.path, torch)))
    else:
        sys.stdout.write(safe_text(source_text(check, options.path, torch)))
    return 1 if check.rejected() else 0
