"""Issue 51: the kinds of miss `gpudoctor explain` made on fresh public reports, each with a made-up text of the same
shape (none from the reserved threads or the held-out sets): the raising tool's own statement used first, no "no
failure" for a failure in its own tools' words, compute-sanitizer's pasted records read as a run's are, and a common
error's public reports never turned into one cause."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from gpudoctor.knowledge.public import load_corpus
from gpudoctor.report.codec import decode


def _explain(tmp_path: Path, text: str) -> tuple[str, dict[str, object]]:
    log = tmp_path / "job.log"
    log.write_text(text)
    plain = run_cli("explain", str(log), timeout=120).stdout
    return plain, json.loads(run_cli("explain", "--json", str(log), timeout=120).stdout)


def test_the_tools_own_statement_of_the_remedy_comes_first(tmp_path: Path) -> None:
    text = ("Traceback (most recent call last):\n  File \"/srv/app/run.py\", line 12, in <module>\n"
            "    launch(x)\nRuntimeError: the fused kernel is only applicable on compute capability 9.0 and above; "
            "your device is 8.6\n")  # fmt: skip
    plain, _ = _explain(tmp_path, text)
    assert 'it says itself: "RuntimeError: the fused kernel is only applicable on compute capability 9.0' in plain
    assert "fix: First what" in plain and "itself says" in plain


def test_a_failure_in_its_own_tools_words_is_never_no_failure(tmp_path: Path) -> None:
    for text in (
        "[ 4412.1] NVRM: Xid (PCI:0000:17:00): 48, pid=2210, name=python, An uncorrectable double bit error\n",
        "[ 9.8] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x62:0x55:2477)\n",
        "kernel: NVRM: GPU1 kgspBootGspRm: GSP-RM boot failed\n",
        "demo.mojo:14:5: note: constraint failed: this kernel needs a GPU with tensor cores\n",
        "ninja: build stopped: subcommand failed.\n",
        "========= Invalid __shared__ write of size 4 bytes\n=========     at scan_block+0x90\n",
    ):
        _, report = _explain(tmp_path, text)
        run = report["results"][0]  # type: ignore[index]
        assert run["outcome"] == "fail", text
        assert "no failure found" not in run["summary"], text


def test_compute_sanitizers_pasted_records_name_kernel_and_access(tmp_path: Path) -> None:
    text = ("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n"
            "=========     at gather_rows+0x1a0 in /src/k.cu:22\n=========     by thread (31,0,0) in block (1023,0,0)\n"
            "=========     Address 0x7f10 is out of bounds\n"
            "=========     and is 64 bytes after the nearest allocation at 0x7f00 of size 4,096 bytes\n"
            "========= ERROR SUMMARY: 1 error\n")  # fmt: skip
    _, document = _explain(tmp_path, text)
    report = decode(document)
    (lead,) = [f for f in report.findings if f.is_problem]
    assert any("kernel `gather_rows` (/src/k.cu:22) reads 4 bytes of global memory out of bounds" in e
               for e in lead.evidence), lead.evidence  # fmt: skip
    # a pytest banner of equals signs is no sanitizer record
    _, passed = _explain(tmp_path, "============ 12 passed in 3.1s ============\n")
    assert passed["results"][0]["outcome"] == "pass"  # type: ignore[index]


def test_a_common_errors_reports_are_never_read_as_one_cause() -> None:
    corpus = load_corpus()
    # the words every faulting kernel's report carries: no report is "the same error" on them alone
    assert corpus.nearest(["RuntimeError: CUDA error: an illegal memory access was encountered"]) == []
    assert corpus.nearest(["RuntimeError: CUDA error: device-side assert triggered"]) == []
