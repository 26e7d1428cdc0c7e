"""Render a Report as Markdown (to paste into a bug report) or as plain text (a terminal or a pipe).

Text from probes is untrusted: control characters are made visible, never sent to the terminal raw.
"""

from __future__ import annotations

import re

from gpudoctor.kernelsection import KernelTensorArg
from gpudoctor.model import Environment, Finding, Outcome, ProbeResult, Report
from gpudoctor.report.header import header_lines
from gpudoctor.safetext import safe_text
from gpudoctor.stackfacts import BuildFacts, StackFacts

_TAIL_LINES = 30
GITHUB_BODY_LIMIT = 65_536  # characters in a GitHub issue body
_LINE_CHARS = 400  # a stderr line longer than this is cut (a minified blob is no help in an issue)


def _cell(text: object) -> str:
    return safe_text(str(text)).replace("|", "\\|").replace("\n", " ")


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{safe_text(text).rstrip()}\n{fence}"


def _tail(text: str, lines: int = _TAIL_LINES) -> str:
    kept = text.rstrip().splitlines()[-lines:] if lines > 0 else []
    return "\n".join(line if len(line) <= _LINE_CHARS else line[:_LINE_CHARS] + " [...]" for line in kept)


def environment_rows(environment: Environment) -> list[tuple[str, str]]:
    """The environment as (label, value) pairs, in the order a reader wants them."""
    driver = environment.driver
    rows: list[tuple[str, str]] = [("NVIDIA driver", driver.version or driver.status)]
    if driver.available:
        rows.append(("CUDA driver", driver.cuda_driver_version or "N/A"))
        if not driver.gpus:
            rows.append(("GPUs", "none"))
        for gpu in driver.gpus:
            facts = [f"sm_{gpu.compute_capability.replace('.', '')}" if gpu.compute_capability else "cc N/A"]
            if gpu.memory_total_mib is not None:
                facts.append(f"{gpu.memory_total_mib} MiB")
            if gpu.mig_mode:
                facts.append("MIG on")
            rows.append((f"GPU {gpu.index}", f"{gpu.name or 'N/A'} ({', '.join(facts)})"))
    platform = environment.platform
    rows.append(("Python", f"{platform.python} ({platform.python_implementation}) {environment.python_executable}"))
    rows.append(("OS", " ".join(filter(None, [platform.os_release or platform.os, platform.machine]))))
    rows.append(("kernel / libc", f"{platform.kernel or 'N/A'} / {platform.libc or 'N/A'}"))
    for name, version in environment.packages.items():
        rows.append((name, version or "not installed"))
    if (packaging := environment.max_packaging) is not None:
        rows.append(("MAX packaging", packaging))
    if environment.mojo_cli:
        rows.append(("mojo CLI", environment.mojo_cli))
    rows += _toolchain_rows(environment.stack)
    for name, value in environment.env_vars.items():
        rows.append((f"${name}", value))
    return rows


def _toolchain_rows(stack: StackFacts) -> list[tuple[str, str]]:
    """What building and loading GPU code would use, where the inventory found it (reports before it have none)."""
    build, libraries = stack.build or BuildFacts(), stack.libraries or {}
    rows = []
    if build.nvcc:
        host = build.host_compiler
        compiler = f"; host {host} {build.host_compiler_major}" if host else ""
        rows.append(("CUDA toolkit", f"nvcc {build.nvcc_cuda or '?'} at {build.nvcc}{compiler}"))
    if build.triton_ptxas:
        blackwell = build.triton_ptxas_blackwell_cuda
        extra = f" (ptxas-blackwell {blackwell})" if blackwell else ""
        release = build.triton_ptxas_cuda or "?"
        rows.append(("Triton ptxas", f"CUDA {release}{extra} at {build.triton_ptxas}"))
    if build.compute_sanitizer:
        rows.append(("compute-sanitizer", f"{build.compute_sanitizer} (from {build.compute_sanitizer_from or '?'})"))
    for name in ("libcuda.so.1", "libnvrtc.so.12", "libnvrtc.so.13", "libnvJitLink.so.12", "libnvJitLink.so.13"):
        fact = libraries.get(name)
        if fact is not None and fact.loader:
            rows.append((name, f"{fact.loader} ({fact.via})"))
    return rows


def _tensor_text(tensor: KernelTensorArg) -> str:
    dtype = tensor.get("dtype") or "any dtype"
    rank = f"rank {tensor['rank']}" if tensor.get("rank") is not None else "any rank"
    variadic = " (variadic)" if tensor.get("variadic") else ""
    return f"{tensor['role']}{variadic} {tensor['name']}: {dtype}, {rank}"


def kernel_lines(report: Report) -> list[str]:
    """What `gpudoctor kernel` read in the package and which calls it made, as plain lines."""
    if not report.kernel:
        return []
    kernel = report.kernel
    scan = kernel["scan"]
    lines = [f"package {kernel['package']} ({len(scan['files'])} .mojo files)"]
    if not scan["is_package"]:
        lines.append("  no __init__.mojo: CustomOpLibrary needs a package folder")
    for op in scan["ops"]:
        tensors = "; ".join(_tensor_text(t) for t in op["tensors"]) or "signature not understood"
        params = f"; parameters [{', '.join(op['parameters'])}]" if op["parameters"] else ""
        lines.append(f"  op {op['name']} ({op['file']}:{op['line']}): {tensors}{params}")
    if not scan["ops"]:
        lines.append("  no @register(...) op found by the scan")
    for legacy in scan["legacy_imports"]:
        lines.append(f"  pre-Mojo-1.x import at {legacy['file']}:{legacy['line']}: {legacy['text']}")
    lines += [f"  note: {note}" for note in scan["notes"]]
    for call in kernel["calls"]:
        outs = ", ".join(f"{t['dtype']}{t['shape']}" for t in call["outputs"])
        ins = ", ".join(f"{t['dtype']}{t['shape']}" for t in call["inputs"])
        params = f" parameters {call['parameters']}" if call["parameters"] else ""
        lines.append(f"  call {call['op']}(out: {outs}; in: {ins}){params}, values {call['values']}")
    if not kernel["calls"] and scan["ops"]:
        first = scan["ops"][0]
        lines.append(
            f"  no calls given; to run one on every device: gpudoctor kernel {kernel['package']} "
            f"--op {first['name']} --shape 64x64 (or --spec FILE)"
        )
    return lines


def patch_commands(report: Report, patch: str) -> list[str]:
    """How to apply a finding's patch to the examined environment, and to undo it."""
    python = report.environment.python_executable
    return [
        f"paste `gpudoctor patch show {patch}` at the top of your script, or",
        f"gpudoctor patch install {patch} --python {python}   (undo: gpudoctor patch remove {patch} --python {python})",
    ]


def cost_line(result: ProbeResult) -> str | None:
    """ "5.8 s wall, 5.8 s CPU, 719 MiB peak" (None for a run that never started a process)."""
    if result.cpu_s is None and not result.steps:
        return None
    parts = [f"{result.duration_s:.1f} s wall"]
    if result.cpu_s is not None:
        parts.append(f"{result.cpu_s:.1f} s CPU")
    if result.peak_rss_mib is not None:
        parts.append(f"{result.peak_rss_mib:.0f} MiB peak")
    return ", ".join(parts)


def steps_line(result: ProbeResult) -> str:
    """Where the wall time went, step by step: "interpreter start 0.9 s · import torch 0.8 s · ..."."""
    return " · ".join(f"{step.name} {step.duration_s:.1f} s" for step in result.steps)


def _timings_markdown(report: Report) -> list[str]:
    timed = [r for r in report.results if r.steps]
    if not timed:
        return []
    lines = ["<details><summary>Where the time went</summary>", ""]
    lines += ["| run | wall | CPU | peak memory | steps |", "| --- | --- | --- | --- | --- |"]
    for result in timed:
        cpu = f"{result.cpu_s:.1f} s" if result.cpu_s is not None else ""
        peak = f"{result.peak_rss_mib:.0f} MiB" if result.peak_rss_mib is not None else ""
        lines.append(
            f"| {_cell(result.id)} | {result.duration_s:.1f} s | {cpu} | {peak} | {_cell(steps_line(result))} |"
        )
    return [*lines, "", "</details>", ""]


def _summary_markdown(report: Report) -> str:
    """The first line of a bug report: what ran and what is wrong."""
    counts: dict[str, int] = {}
    for result in report.results:
        counts[result.outcome.value] = counts.get(result.outcome.value, 0) + 1
    ran = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items(), key=lambda item: -item[1]))
    if patched := sum(r.patched for r in report.results):
        ran += f"; {patched} of them with a verified patch applied"
    problems = [f.title for f in report.findings if f.is_problem]
    verdict = "**healthy**" if report.exit_code == 0 else "**problems found**"
    line = f"{verdict}: {len(report.results)} probe runs ({ran or 'none'})"
    if problems:
        line += f"; known issues: {_cell('; '.join(problems))}"
    return line + ("; interrupted before every run ended" if report.interrupted else "")


# Mapped libraries worth naming in a report (all of them are in the JSON): those the crash's native frames are in,
# and GPU-stack libraries loaded from somewhere else than an interpreter's packages, the system or the driver's folder
# (a CUDA toolkit on LD_LIBRARY_PATH ahead of pip's wheels, a conda folder, a copy in a home directory).
_LIBRARIES_SHOWN = re.compile(r"lib(cuda|nv|cu|max|MGP|Mojo|modular|torch|c10|triton|python|stdc\+\+|gomp|omp)", re.I)
_USUAL_PLACES = re.compile(r"/(?:site|dist)-packages/|^/(?:usr/)?lib(?:64)?/|^/usr/local/nvidia/")
_THREADS_SHOWN = 8


def where_it_died(result: ProbeResult) -> list[str]:
    """A crash's or hang's stacks as lines: Python frames per thread (faulthandler's), native frames (the crashing
    thread's in full, a few of every other thread's) and the GPU-stack libraries it had mapped."""
    lines: list[str] = []
    by_thread: dict[str, list[str]] = {}
    for frame in result.frames if result.outcome in (Outcome.CRASH, Outcome.TIMEOUT) else ():
        label = (
            "crashing thread"
            if frame.thread == "current" and result.outcome is Outcome.CRASH
            else (f"thread {frame.thread}" if frame.thread and frame.thread != "current" else "main thread")
        )
        by_thread.setdefault(label, []).append(f"{frame.file}:{frame.line if frame.line is not None else '?'} in "
                                               f"{frame.function}")  # fmt: skip
    for label, frames in list(by_thread.items())[:_THREADS_SHOWN]:
        lines += [f"Python, {label}:"] + [f"  {f}" for f in frames[:12]]
    if result.native is not None:
        lines.append(f"native frames: {result.native.how}")
        native: dict[str, list[str]] = {}
        for native_frame in result.native.frames:
            native.setdefault(native_frame.thread, []).append(f"#{native_frame.number} {native_frame.function}" + (
                f" ({native_frame.where})" if native_frame.where else ""))  # fmt: skip
        for label, frames in list(native.items())[:_THREADS_SHOWN]:
            shown = frames[:24] if label == "crashing thread" else frames[:4]
            lines += [f"  {label}:"] + [f"    {f}" for f in shown]
    if result.mapped_libraries:
        shown = libraries_that_matter(result)
        lines.append(f"libraries mapped: {len(result.mapped_libraries)} (all of them in the JSON)" + (
            "; where it died, or from an unusual place:" if shown else ""))  # fmt: skip
        lines += [f"  {p}" for p in shown[:20]]
    return lines


def libraries_that_matter(result: ProbeResult) -> list[str]:
    """The mapped libraries a reader needs: those the native frames died in, and the GPU stack's loaded from an
    unusual place."""
    named = " ".join(f"{f.function} {f.where or ''}" for f in result.native.frames) if result.native else ""
    return [
        path
        for path in result.mapped_libraries
        if (name := path.rsplit("/", 1)[-1]) and (name in named or (
            _LIBRARIES_SHOWN.search(name) and not _USUAL_PLACES.search(path)))
    ]  # fmt: skip


def _problem_details_markdown(result: ProbeResult, tail_lines: int = _TAIL_LINES) -> list[str]:
    lines = [f"### {result.id}: {result.outcome.word}", "", safe_text(result.summary), ""]
    lines += ["Reproduce:", "", _fence(result.command), ""]
    if result.native is not None or result.mapped_libraries:
        lines += ["Where it died:", "", _fence("\n".join(where_it_died(result))), ""]
    elif result.frames:
        frames = "\n".join(
            f"[{f.thread or 'main'}] {f.file}:{f.line if f.line is not None else '?'} in {f.function}"
            for f in result.frames
        )
        lines += ["Python frames (innermost first):", "", _fence(frames), ""]
    if result.stderr_tail.strip() and tail_lines > 0:
        lines += [
            "<details><summary>stderr (tail)</summary>",
            "",
            _fence(_tail(result.stderr_tail, tail_lines)),
            "",
            "</details>",
            "",
        ]
    return lines


def to_markdown(report: Report, limit: int = GITHUB_BODY_LIMIT) -> str:
    """A report fit to paste into a GitHub issue: the summary first, then environment, outcomes, findings, and
    each problem's details with long parts (stderr, timings) folded in <details>; never longer than ``limit``
    characters, whatever the probes printed (stderr tails shrink first, then the text is cut with a note)."""
    for tail_lines in (_TAIL_LINES, 10, 3, 0):
        text = _markdown(report, tail_lines)
        if len(text) <= limit:
            return text
    note = "\n\n*(cut to fit GitHub's 65,536-character limit: `gpudoctor --json` has everything)*\n"
    return text[: limit - len(note)] + note


def _finding_markdown(report: Report, finding: Finding) -> list[str]:
    lines = [f"### Known issue: {_cell(finding.title)}", ""]
    evidence, consequences = report.parts_of(finding)
    shown = list(dict.fromkeys([*finding.evidence, *(e for f in evidence for e in f.evidence)]))
    lines += [f"- evidence: {_cell(e)}" for e in shown]
    lines += [f"- consequence: {_cell(f.title)}" + (f" ({_cell(f.evidence[0])})" if f.evidence else "") + f" [{f.id}]"
              for f in consequences]  # fmt: skip
    lines += ["", safe_text(finding.explanation), "", f"Fix: {safe_text(finding.fix)}", ""]
    if finding.patch_note:
        lines += [f"Patch: {safe_text(finding.patch_note)}", ""]
    if finding.patch_verified:
        lines += ["Apply it here:", "", _fence("\n".join(patch_commands(report, finding.patch or ""))), ""]
    return lines


def _markdown(report: Report, tail_lines: int) -> str:
    subject = report.own_result()
    leading, aside = report.findings_in_order()
    environment = ["| | |", "| --- | --- |"]
    environment += [f"| {_cell(label)} | {_cell(value)} |" for label, value in environment_rows(report.environment)]
    if subject is not None:  # one failure: its header and verdict first, the whole inventory folded at the end
        head = header_lines(report, subject)
        lines = [f"## {_cell(head[0])} ({report.created})", "", *(f"{_cell(line)}  " for line in head[1:]), ""]
        for finding in leading:
            lines += _finding_markdown(report, finding)
    else:
        lines = [f"## gpudoctor {report.doctor_version} report ({report.created})", "", _summary_markdown(report), ""]
        lines += [*environment, ""]
    if report.kernel:
        lines += ["### Kernel package", "", _fence("\n".join(kernel_lines(report))), ""]
    if report.results:
        lines += ["| probe | outcome | time | summary |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {_cell(r.id)} | {r.outcome.word} | {r.duration_s:.1f} s | {_cell(r.summary)} |" for r in report.results
        ]
        lines.append("")
    else:
        lines += ["No probes ran (inventory only).", ""]
    for finding in leading if subject is None else ():
        lines += _finding_markdown(report, finding)
    if aside:
        lines += ["### Other notices (they bear on no failing run; `--json` has their full text)", ""]
        lines += [f"- {_cell(f.title)} [{f.id}]" for f in aside] + [""]
    for result in report.results:
        if result.outcome.is_problem:
            lines += _problem_details_markdown(result, tail_lines)
    lines += _timings_markdown(report)
    if subject is not None:
        lines += ["<details><summary>Environment (this machine's whole inventory)</summary>", "", *environment, "",
                  "</details>", ""]  # fmt: skip
    return "\n".join(lines).rstrip() + "\n"


def _finding_text(report: Report, finding: Finding) -> list[str]:
    """One finding as text, with what supports it and what follows from it (knowledge.verdict) inside it."""
    lines = ["", f"  {finding.severity}: {safe_text(finding.title)} [{finding.id}]"]
    evidence, consequences = report.parts_of(finding)
    shown = list(dict.fromkeys([*finding.evidence, *(e for f in evidence for e in f.evidence)]))
    lines += [f"    evidence: {safe_text(e)}" for e in shown]
    for follows in consequences:
        first = f" ({follows.evidence[0]})" if follows.evidence else ""
        lines.append(f"    consequence: {safe_text(follows.title)}{safe_text(first)} [{follows.id}]")
    lines.append(f"    fix: {safe_text(finding.fix)}")
    if finding.patch_note:
        lines.append(f"    patch: {safe_text(finding.patch_note)}")
    if finding.patch_verified:
        lines += [f"    apply it here: {safe_text(line)}" for line in patch_commands(report, finding.patch or "")]
    return lines


def to_text(report: Report) -> str:
    """Plain text for a terminal that is not interactive or a pipe. A report about one failure (`run`, `explain`)
    opens with a header of three lines and its verdict; the doctor's own report with the whole inventory."""
    subject = report.own_result()
    leading, aside = report.findings_in_order()
    if subject is not None:
        lines = [safe_text(line) for line in header_lines(report, subject)]
        for finding in leading:
            lines += _finding_text(report, finding)
        lines.append("")
    else:
        rows = environment_rows(report.environment)
        width = max(len(label) for label, _ in rows)
        lines = [f"gpudoctor {report.doctor_version}", ""]
        lines += [f"  {label.ljust(width)}  {safe_text(value)}" for label, value in rows]
        lines.append("")
    if report.kernel:
        lines += [f"  {safe_text(line)}" for line in kernel_lines(report)] + [""]
    if report.results:
        id_width = max(len(r.id) for r in report.results)
        for result in report.results:
            lines.append(
                f"  {result.outcome.word:<8} {result.id.ljust(id_width)}  {result.duration_s:6.1f} s  "
                f"{safe_text(result.summary)}"
            )
            if result.outcome.is_problem:
                lines.append(f"  {'':<8} {'':<{id_width}}  reproduce: {safe_text(result.command)}")
                if result.native is not None or result.mapped_libraries:
                    lines += [f"    {safe_text(line)}" for line in where_it_died(result)]
    else:
        lines.append("  no probes ran (inventory only)")
    for finding in leading if subject is None else ():
        lines += _finding_text(report, finding)
    if aside:
        lines += ["", "  other notices (they bear on no failing run; --json has their full text):"]
        lines += [f"    {safe_text(f.title)} [{f.id}]" for f in aside]
    lines += [
        "",
        f"  {len(report.results)} probe runs, {report.problem_runs} with problems, "
        f"{report.problem_findings} problem findings",
    ]
    if patched := [r.id for r in report.results if r.patched]:
        lines.append(f"  with a verified patch applied (the stack with the fix in, not as it is): {', '.join(patched)}")
    if report.interrupted:
        cut = sum(r.outcome is Outcome.INTERRUPTED for r in report.results)
        lines.append(f"  interrupted: {cut} runs did not end; the others are shown as they ended")
    return "\n".join(lines) + "\n"
