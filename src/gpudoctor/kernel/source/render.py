"""The source check as text and Markdown: what needs a change for the installed releases, what the code was
written for, and the command that runs it there.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gpudoctor.kernel.source.check import SourceCheck, SourceHit
from gpudoctor.redact import redact_text

MAX_SHOWN = 40


def run_there_command(check: SourceCheck, package: Path, torch: str | None) -> str | None:
    """`gpudoctor sweep` on the newest release the code was written for, when that is not the installed one."""
    if not check.written_for or check.conflicts:
        return None
    release = check.written_for[-1]
    if check.installed.get("max") in check.written_for:
        return None
    torch_spec = torch.split("+")[0] if torch else "2.13"
    return (
        f"gpudoctor sweep --torch {torch_spec} --max {release} --kernel {shlex.quote(redact_text(str(package)))} "
        "--no-matrix"
    )


def _versions(check: SourceCheck) -> str:
    return ", ".join(f"{p} {v}" if v else f"{p} not installed" for p, v in sorted(check.installed.items()))


def _hit_lines(hits: tuple[SourceHit, ...], version_of: dict[str, str | None]) -> list[str]:
    lines = []
    for hit in hits[:MAX_SHOWN]:
        version = version_of.get(hit.rule.package) or ""
        lines.append(f"  {hit.file}:{hit.line}: {hit.text}")
        lines.append(f"      {hit.rule.construct}: {hit.rule.changed_in(version)} ({hit.rule.id})")
        lines.append(f"      write: {hit.rule.rewrite}")
    if len(hits) > MAX_SHOWN:
        lines.append(f"  ... and {len(hits) - MAX_SHOWN} more")
    return lines


def source_text(check: SourceCheck, package: Path, torch: str | None = None) -> str:
    rejected = check.rejected()
    lines = [f"Source check: {len(check.files)} file(s) under {redact_text(str(package))}, against {_versions(check)}"]
    written = check.written_for_text()
    if written:
        lines.append(f"Written for: {written} (the releases that accept every MAX construct found)")
    else:
        lines.append("Written for: nothing found says which MAX release")
    if rejected:
        lines += ["", f"{len(rejected)} line(s) need a change for the installed releases:"]
        lines += _hit_lines(rejected, dict(check.installed))
    else:
        lines += ["", "Every construct found is accepted by the installed releases."]
    command = run_there_command(check, package, torch)
    if command:
        lines += [
            "",
            "Run it on the release it was written for (an environment the sweep builds with uv):",
            f"  {command}",
        ]
    return "\n".join(lines) + "\n"


def source_markdown(check: SourceCheck, package: Path, torch: str | None = None) -> str:
    rejected = check.rejected()
    lines = [
        "## Source check",
        "",
        f"{len(check.files)} file(s) under `{redact_text(str(package))}`, against {_versions(check)}.",
        "",
        f"**Written for:** {check.written_for_text() or 'nothing found says which MAX release'}",
        "",
    ]
    if rejected:
        lines += ["| line | construct | changed | write instead |", "| --- | --- | --- | --- |"]
        for hit in rejected[:MAX_SHOWN]:
            version = check.installed.get(hit.rule.package) or ""
            cells = [
                f"`{hit.file}:{hit.line}` `{hit.text}`",
                hit.rule.construct,
                hit.rule.changed_in(version),
                hit.rule.rewrite,
            ]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    else:
        lines.append("Every construct found is accepted by the installed releases.")
    command = run_there_command(check, package, torch)
    if command:
        lines += ["", f"Run it on the release it was written for: `{command}`"]
    return "\n".join(lines) + "\n"
