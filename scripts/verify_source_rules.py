"""Check every source rule that has a sample against real releases: compile each Mojo sample with the `mojo`
of each environment, run each Python sample with its interpreter, and compare with the rule's `accepted`.

    python scripts/verify_source_rules.py ENV [ENV ...] [--write docs/source-rules.md]

Each ENV is a virtual environment with one MAX release installed (e.g. the cells `gpudoctor sweep` builds).
Prints a table (rule x release: accepted or not, as observed) and every disagreement; exits 1 if any.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.version import Version

from gpudoctor.kernel.source.rules import SourceRule, shipped_rules


def max_version(env: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('max'))"
    return subprocess.run([str(env / "bin" / "python"), "-c", code], capture_output=True, text=True).stdout.strip()


def compiles(env: Path, sample: str) -> tuple[bool, str]:
    """Whether this environment's Mojo compiler accepts ``sample`` as a package, and its first error."""
    with tempfile.TemporaryDirectory(prefix="gpudoctor-rule-") as scratch:
        package = Path(scratch) / "sample"
        package.mkdir()
        (package / "__init__.mojo").write_text("")
        (package / "sample.mojo").write_text(sample)
        mojo = str(env / "bin" / "mojo")
        help_text = subprocess.run([mojo, "--help"], capture_output=True, text=True).stdout
        if "precompile" in help_text:
            command = [mojo, "precompile", str(package), "-o", str(Path(scratch) / "out.mojoc")]
        else:
            command = [mojo, "package", str(package), "-o", str(Path(scratch) / "out.mojopkg")]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "error:" in line]
    return done.returncode == 0, (errors[0].split("error:", 1)[1].strip() if errors else "")


def runs(env: Path, sample: str) -> tuple[bool, str]:
    done = subprocess.run([str(env / "bin" / "python"), "-c", sample], capture_output=True, text=True, timeout=300)
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return done.returncode == 0, last


def observe(rule: SourceRule, env: Path) -> tuple[bool, str]:
    assert rule.sample is not None
    return compiles(env, rule.sample) if rule.language == "mojo" else runs(env, rule.sample)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="+", type=Path)
    parser.add_argument("--write", type=Path, help="also write the table as Markdown to this file")
    parser.add_argument("--rules", help="only these rule ids (comma-separated): a quick check of new rules")
    options = parser.parse_args()
    releases = sorted(((max_version(env), env) for env in options.envs), key=lambda item: Version(item[0]))
    rules = [r for r in shipped_rules().rules if r.sample is not None and r.package == "max"]
    if options.rules:
        rules = [r for r in rules if r.id in options.rules.split(",")]
    jobs = [(rule, version, env) for rule in rules for version, env in releases]
    with ThreadPoolExecutor(max_workers=4) as pool:
        seen = list(pool.map(lambda job: observe(job[0], job[2]), jobs))
    observed = {(rule.id, version): result for (rule, version, _), result in zip(jobs, seen, strict=True)}
    versions = [v for v, _ in releases]
    lines = [
        "# Source rules, verified on real releases",
        "",
        "Written by `python scripts/verify_source_rules.py ENV...` (one environment per MAX release, as "
        "`gpudoctor sweep` builds them): each rule's sample compiled with that release's `mojo` (Mojo rules) or "
        "run with its Python (Python rules). ✓ accepted, ✗ rejected, as observed; `!` marks a disagreement with "
        "the rule's `accepted`. Rules without a sample say in `verified` how their range is known.",
        "",
        "| rule | accepted | " + " | ".join(versions) + " |",
        "| --- | --- | " + " | ".join("---" for _ in versions) + " |",
    ]
    disagreements = []
    for rule in rules:
        cells = []
        for version in versions:
            ok, error = observed[(rule.id, version)]
            mark = "✓" if ok else "✗"
            if ok != rule.accepts(version):
                mark += "!"
                disagreements.append(f"{rule.id} on MAX {version}: {'accepted' if ok else 'rejected'} ({error})")
            cells.append(mark)
        lines.append(f"| `{rule.id}` | `{rule.accepted}` | " + " | ".join(cells) + " |")
    lines += ["", "First error of each rejection, as the compiler or interpreter gave it:", ""]
    for rule in rules:
        errors = sorted({observed[(rule.id, v)][1] for v in versions if not observed[(rule.id, v)][0]} - {""})
        if errors:
            lines.append(f"- `{rule.id}`: " + "; ".join(f"`{e}`" for e in errors))
    if disagreements:
        lines += ["", "Disagreements:", ""] + [f"- {d}" for d in disagreements]
    text = "\n".join(lines) + "\n"
    print(text)
    if options.write:
        options.write.write_text(text)
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
