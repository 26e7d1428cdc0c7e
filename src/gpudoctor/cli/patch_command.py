"""`gpudoctor patch {list,show,install,remove}`: the verified workarounds, for the environment that needs them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpudoctor.cli.common import OneLineParser
from gpudoctor.errors import GpuDoctorError
from gpudoctor.process.session import ExitCode


def build_parser() -> argparse.ArgumentParser:
    from gpudoctor.patches import PATCH_MODULES

    parser = OneLineParser(
        prog="gpudoctor patch",
        description="The workarounds a finding names. `show` prints one to paste at the top of your script; "
        "`install` puts it into an environment (a hook that runs it just before MAX's torch bridge is imported, "
        "nothing at interpreter start), `remove` takes it out again. Each says every file it writes or deletes.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("list", help="the patches and the known issue each works around")
    for name, text in (("show", "print the patch"), ("install", "install into an environment"),
                       ("remove", "remove from an environment")):  # fmt: skip
        sub = commands.add_parser(name, help=text)
        sub.add_argument("patch", choices=sorted(PATCH_MODULES), help="the patch id a finding names")
        if name != "show":
            sub.add_argument("--python", metavar="PATH", help="the environment's interpreter (default: this one)")
    return parser


def run(argv: Sequence[str]) -> int:
    from gpudoctor.atomic import atomic_write
    from gpudoctor.facts.interpreter import resolve_python, site_packages
    from gpudoctor.knowledge import load_knowledge
    from gpudoctor.patches import HOOK_MODULE, HOOK_PTH, PATCH_MODULES, install_files, installed_file, patch_file

    options = build_parser().parse_args(argv)
    if options.command == "list":
        issues = {issue.patch: issue for issue in load_knowledge() if issue.patch}
        for patch in sorted(PATCH_MODULES):
            issue = issues.get(patch)
            print(f"{patch}: {issue.title if issue else 'no known issue names it'}")
        return ExitCode.OK
    if options.command == "show":
        sys.stdout.write(patch_file(options.patch).read_text(encoding="utf-8"))
        return ExitCode.OK
    site = site_packages(resolve_python(options.python))
    if options.command == "install":
        for name, text in install_files(options.patch).items():
            try:
                atomic_write(site / name, text, mode=0o644)
            except OSError as error:
                raise GpuDoctorError(f"{site / name}: cannot write: {error.strerror or error}") from error
            print(f"wrote {site / name}")
        print(f"patch {options.patch} installed; remove it with: gpudoctor patch remove {options.patch} "
              f"--python {resolve_python(options.python)}")  # fmt: skip
        return ExitCode.OK
    removed = [site / installed_file(options.patch)]
    if not [p for p in site.glob("gpudoctor_patch_*.py") if p.name != installed_file(options.patch)]:
        removed += [site / HOOK_MODULE, site / HOOK_PTH]  # the last patch goes: the hook goes too
    for path in removed:
        if path.exists():
            path.unlink()
            print(f"removed {path}")
    return ExitCode.OK
