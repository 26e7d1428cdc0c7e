"""Run `gpudoctor kernel` on the CPU over MAX's own custom-op examples and print one row per example: the ops called,
the outcome of the kernel/cpu run and the finding ids. Issue 43's acceptance: no finding about a correct kernel.

The examples are third-party code and are not in this repository: give a folder holding one package folder per
example (`add_one/`, `image_pipeline/`, ... each with an `__init__.mojo` and the example's `.mojo` file, copied from
MAX's examples; docs/perf-local/2026-11-27-official-examples.txt says from which commits). The calls are ours:
tests/kernels/official_specs/<example>.toml calls each op the way the example's Python driver does (shapes, dtypes,
compile-time parameters) and checks it against the example's formula where that is plain. Runs offline.

    python scripts/official_examples.py /tmp/official-max-examples [--only add_one] [--timeout 1800]

Exit 1 when a correct example gets a problem finding (a false alarm), when an example with a known bug is not
caught, or when a run gives no verdict; an example that does not compile on the installed MAX (its source was
written for another release) is reported, not counted: that is the example's drift, and gpudoctor says so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "tests" / "kernels" / "official_specs"

# Examples whose CPU path really is wrong, with the finding that says so and why (not false alarms).
KNOWN_BUGS: dict[str, tuple[str, str]] = {
    "matrix_multiplication": (
        "kernel-accumulates-into-output",
        "naive_matrix_multiplication_cpu does output[row, col] = output[row, col] + a[row, k] * b[k, col] without "
        "zeroing the output first (the GPU path memsets it; the CPU path relies on the caller's buffer being zeros)",
    ),
}
# Examples with no op a spec can call, and why (no spec file for them).
NOT_CALLABLE: dict[str, str] = {
    "mandelbrot": "its only inputs are runtime scalars (Float32 min_x, min_y, scale_x, scale_y, Int32 "
    "max_iterations), which a spec cannot pass",
    "tensor_core_mma": "GPU only (AMD/NVIDIA tensor cores, no CPU path) and a runtime Bool argument",
}
# Findings that say the package does not build on the installed MAX: the example's drift, not a verdict on its code.
DOES_NOT_BUILD = {"kernel-does-not-compile", "kernel-source-needs-another-release", "mojo1-kernel-migration"}


@dataclass
class Row:
    example: str
    ops: str = "-"
    outcome: str = "-"
    findings: list[str] = field(default_factory=list)
    verdict: str = ""
    counts: bool = False  # a false alarm, a missed bug or no verdict: makes the script exit 1
    note: str = ""
    seconds: float = 0.0


def describe_calls(calls: list[dict[str, Any]]) -> str:
    """``top_k_custom[K=8], top_k_custom[K=1]``: each distinct op and parameters, in the order called."""
    seen: list[str] = []
    for call in calls:
        parameters = call.get("parameters") or {}
        text = call["op"] + ("[" + ", ".join(f"{k}={v}" for k, v in parameters.items()) + "]" if parameters else "")
        if text not in seen:
            seen.append(text)
    return ", ".join(seen) or "-"


def first_compiler_error(result: dict[str, Any]) -> str:
    errors = (result.get("details") or {}).get("compile_errors") or []
    text = next((e for e in errors if ": error: " in e), errors[0] if errors else result.get("message") or "")
    return str(text).replace(str(Path.home()), "~")


def judge(row: Row, report: dict[str, Any]) -> None:
    """Fill in the row's verdict from one `gpudoctor kernel --json` report."""
    kernel = report.get("kernel") or {}
    row.ops = describe_calls(kernel.get("calls") or [])
    result: dict[str, Any] = next((r for r in report.get("results", []) if r.get("id") == "kernel/cpu"), {})
    row.outcome = result.get("outcome", "not run")
    problems = [f["id"] for f in report.get("findings", []) if f.get("severity") == "problem"]
    row.findings = [f["id"] + ("" if f.get("severity") == "problem" else " (notice)") for f in report["findings"]]
    message = result.get("message") or ""
    compile_failed = result.get("exception_type") == "CompileFailed"
    if row.outcome not in ("pass", "not run") and (
        compile_failed or DOES_NOT_BUILD & set(problems) or "failed to import kernels" in message
    ):
        row.verdict = "does not compile on this MAX (API drift, not a gpudoctor verdict)"
        row.note = first_compiler_error(result) if compile_failed else message
        drift = next((f for f in report["findings"] if f["id"] == "kernel-source-needs-another-release"), None)
        if drift and drift.get("evidence"):
            row.note += f" (gpudoctor: {drift['evidence'][0]})"
        return
    expected = KNOWN_BUGS.get(row.example)
    unexpected = [f for f in problems if not expected or f != expected[0]]
    if unexpected:
        row.verdict, row.counts = "FALSE ALARM", True
        row.note = message or "; ".join(unexpected)
    elif expected and expected[0] not in problems:
        row.verdict, row.counts = f"MISSED: expected {expected[0]}", True
        row.note = expected[1]
    elif expected:
        row.verdict = "known bug in the example, caught"
        row.note = expected[1]
    elif row.outcome != "pass":
        row.verdict, row.counts = f"{row.outcome} without a finding", True
        row.note = message
    else:
        row.verdict = "passes"


def run_example(python: str, package: Path, spec: Path, timeout: float) -> Row:
    row = Row(package.name)
    command = [python, "-m", "gpudoctor", "kernel", str(package), "--spec", str(spec), "--device", "cpu", "--json"]
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        row.seconds = time.monotonic() - start
        row.verdict, row.counts, row.note = "no verdict", True, f"gpudoctor ran past {timeout:g} s"
        return row
    row.seconds = time.monotonic() - start
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        row.verdict, row.counts, row.note = "no verdict", True, f"exit {done.returncode}: {last[:300]}"
        return row
    judge(row, report)
    return row


def example_folders(examples: Path) -> list[Path]:
    return sorted(p for p in examples.iterdir() if p.is_dir() and any(p.glob("*.mojo")))


def table(rows: list[Row]) -> str:
    header = ("example", "ops called", "kernel/cpu", "findings", "verdict")
    cells = [(r.example, r.ops, r.outcome, ", ".join(r.findings) or "-", r.verdict) for r in rows]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header) - 1)]
    lines = []
    for cell in [header, *cells]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(cell, widths, strict=False)) + "  " + cell[-1])
    return "\n".join(line.rstrip() for line in lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", type=Path, help="a folder of example packages (one folder per example)")
    parser.add_argument("--specs", type=Path, default=SPECS, help="the call specs, <example>.toml each")
    parser.add_argument("--only", action="append", help="run only this example (repeatable)")
    parser.add_argument("--timeout", type=float, default=1800, help="limit for each gpudoctor run (seconds)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter gpudoctor is installed in")
    options = parser.parse_args()
    if not options.examples.is_dir():
        parser.error(f"{options.examples} is not a folder")
    folders = [p for p in example_folders(options.examples) if not options.only or p.name in options.only]
    rows = []
    for package in folders:
        spec = options.specs / f"{package.name}.toml"
        if not spec.is_file():
            why = NOT_CALLABLE.get(package.name)
            rows.append(Row(package.name, verdict="not called", note=why or f"no spec {spec.name}"))
            continue
        print(f"... {package.name}", file=sys.stderr, flush=True)
        row = run_example(options.python, package, spec, options.timeout)
        print(f"    {row.verdict} ({row.seconds:.0f} s)", file=sys.stderr, flush=True)
        rows.append(row)
    missing = sorted({s.stem for s in options.specs.glob("*.toml")} - {p.name for p in folders})
    print(table(rows))
    notes = [f"- {r.example}: {r.note}" for r in rows if r.note]
    if notes:
        print("\n" + "\n".join(notes))
    if missing and not options.only:
        print(f"\nspecs with no package in {options.examples}: {', '.join(missing)}")
    counted = [r.example for r in rows if r.counts]
    counted_text = ", ".join(counted) or "none"
    print(f"\n{len(rows)} examples; false alarms, missed bugs or runs without a verdict: {counted_text}")
    return 1 if counted else 0


if __name__ == "__main__":
    sys.exit(main())
