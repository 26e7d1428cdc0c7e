"""A report read from a file and written to files: the saved ``--json`` document in, and JUnit, JSON and Markdown
out, each written whole or not at all. Every face (the CLI, the TUIs, the pytest plugin) uses these."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Report
from gpudoctor.report.codec import ReportError, decode, encode
from gpudoctor.textfile import read_text

MAX_REPORT_BYTES = 64 * 1024 * 1024


def read_report(path: Path) -> Report:
    """A saved ``gpudoctor --json`` report (bounded read, this schema version, every field checked); anything else
    is a GpuDoctorError naming the file and the first field that is wrong."""
    text = read_text(path, MAX_REPORT_BYTES)
    try:
        return decode(json.loads(text))
    except ReportError as error:
        raise GpuDoctorError(f"{path}: not a gpudoctor --json report ({error.message[:300]})") from None
    except (ValueError, RecursionError) as error:  # not JSON at all
        what = f"{type(error).__name__}: {str(error)[:200]}"
        raise GpuDoctorError(f"{path}: not a gpudoctor --json report ({what})") from None


@dataclass(frozen=True)
class ReportFiles:
    """Where to write the report besides the face's own output (``--junit``, ``--save-json``, ``--save-markdown``)."""

    junit: Path | None = None
    json: Path | None = None
    markdown: Path | None = None

    def write(self, report: Report) -> None:
        from gpudoctor.atomic import atomic_write

        if self.junit is not None:
            from gpudoctor.report.junit import to_junit

            atomic_write(self.junit, to_junit(report), mode=0o644)
        if self.json is not None:
            atomic_write(self.json, json.dumps(encode(report), indent=2) + "\n", mode=0o644)
        if self.markdown is not None:
            from gpudoctor.report.text import to_markdown

            atomic_write(self.markdown, to_markdown(report), mode=0o644)
