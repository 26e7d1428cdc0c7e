""" "What should I pin?": the nearest passing environments of the committed matrix, for recorded sweep reports
of real environments, in every face a report has."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from conftest import ROOT, validate_report

from gpudoctor.doctor import DoctorOptions, pin_advice, with_pin_advice
from gpudoctor.matrix import MatrixStore
from gpudoctor.model import Report
from gpudoctor.report.codec import decode, encode
from gpudoctor.report.text import to_markdown, to_text
from gpudoctor.suite.catalog import default_probe_dir, load_catalog, run_ids

SWEEP = ROOT / "tests" / "fixtures" / "sweep-cpu"
ROWS = MatrixStore(ROOT / "matrix").load()
KNOWN = run_ids(load_catalog(default_probe_dir()))


def _cell(torch: str, max_version: str) -> Report:
    return decode(json.loads((SWEEP / f"py3.11_torch-{torch}_max-{max_version}.json").read_text()))


def test_torch_2_6_with_max_26_7_is_told_the_smallest_torch_step_or_the_verified_patch() -> None:
    advice = pin_advice(_cell("2.6.0", "26.7.0"), ROWS, KNOWN)
    assert advice is not None and advice.severity == "notice"
    assert advice.title == "What to pin: torch 2.6.0 → 2.9.1 reaches an environment where every probe passes"
    story, rows = advice.evidence[0], advice.evidence[1:]  # the matrix's record here first, then the rows
    assert story == "on the CPU (torch 2.6.0): max-import pass on max 25.3.0 … 26.1.0; fail on max 26.2.0 … 26.7.0"
    assert rows[0].startswith("torch 2.6.0 → 2.9.1: matrix row cpu_torch-2.9.1_max-26.7.0_")
    assert "(here max-import fails)" in rows[0]
    assert advice.fix.startswith("pip install 'torch==2.9.1'; or pip install 'torch==2.13.0+cpu'")
    assert advice.fix.endswith("or stay and apply the verified patch: gpudoctor patch install float8-e8m0fnu-alias")


def test_an_old_max_is_told_the_nearest_release_that_passes_and_a_passing_stack_gets_no_advice() -> None:
    advice = pin_advice(_cell("2.13.0", "25.3.0"), ROWS, KNOWN)
    assert advice is not None and advice.title.startswith("What to pin: max 25.3.0 → 25.5.0 reaches")
    assert advice.fix == "pip install 'max==25.5.0'; or pip install 'max==25.6.0'"
    assert pin_advice(_cell("2.13.0", "26.7.0"), ROWS, KNOWN) is None


def test_only_rows_of_the_same_machine_are_offered() -> None:
    report = _cell("2.6.0", "26.7.0")
    elsewhere = dataclasses.replace(
        report,
        environment=dataclasses.replace(
            report.environment, platform=dataclasses.replace(report.environment.platform, machine="aarch64")
        ),
    )
    assert pin_advice(elsewhere, ROWS, KNOWN) is None  # every committed row is x86_64


def test_the_advice_reaches_every_face(tmp_path: Path) -> None:
    report = with_pin_advice(
        _cell("2.6.0", "26.7.0"), DoctorOptions(matrix=ROOT / "matrix"), load_catalog(default_probe_dir())
    )
    assert report.findings[-1].id == "pin-nearest-passing"
    document = encode(report)
    validate_report(document)
    assert document["findings"][-1]["title"].startswith("What to pin: torch 2.6.0 → 2.9.1")
    assert "What to pin: torch 2.6.0 → 2.9.1" in to_text(report)
    assert "What to pin: torch 2.6.0 → 2.9.1" in to_markdown(report)
    assert [f.id for f in report.findings].count("pin-nearest-passing") == 1  # the recorded run's advice replaced
    recorded = _cell("2.6.0", "26.7.0")
    bare = dataclasses.replace(recorded, findings=tuple(f for f in recorded.findings if f.id != "pin-nearest-passing"))
    unread = with_pin_advice(bare, DoctorOptions(matrix=tmp_path), load_catalog(default_probe_dir()))
    assert "pin-nearest-passing" not in {f.id for f in unread.findings}  # no matrix there: no advice, no error


GPU_SWEEP = ROOT / "tests" / "fixtures" / "gpu-sweep"


def test_on_a_gpu_the_advice_tells_the_story_of_the_failing_probe_on_that_gpu() -> None:
    """The H100 cell of MAX 25.4 (recorded): the advice starts with what the matrix recorded for the failing probes
    on an H100 with driver 580 across every MAX release, then names the nearest passing H100 rows — never a CPU
    row or another GPU's."""
    cell = GPU_SWEEP / "h100" / "py3.12_torch-2.11.0_max-25.4.0.report.json"
    report = decode(json.loads(cell.read_text()))
    advice = pin_advice(report, ROWS, KNOWN)
    assert advice is not None and advice.title.startswith("What to pin: max 25.4.0 → 25.5.0")
    assert advice.evidence[:2] == (
        "on an NVIDIA H100 80GB HBM3 with driver 580.159.04 (torch 2.11.0): custom-op-params/cpu fail on max 25.4.0; "
        "pass on max 25.5.0 … 26.7.0",
        "on an NVIDIA H100 80GB HBM3 with driver 580.159.04 (torch 2.11.0): custom-op-params/cuda fail on max 25.4.0; "
        "pass on max 25.5.0 … 26.7.0",
    )
    assert all("h100-80gb-hbm3_" in line for line in advice.evidence[2:])


def test_where_the_gpus_and_the_cpu_disagree_is_found_from_the_rows() -> None:
    """From the committed rows: the one H100 result whose runs did not agree (26.2, custom-op-params/cuda), the
    layout contract that fails on the H100's CUDA where its CPU passes (MAX 26.7 reads views wrong there, issue 50),
    and no GPU-only transition — every change the GPUs show along MAX, some CPU row shows at the same releases."""
    from gpudoctor.matrix.query import device_disagreements

    lines = device_disagreements(ROWS)
    assert lines == ["NVIDIA H100 80GB HBM3, torch 2.11.0, max 26.2.0: custom-op-params/cuda pass in the last 3 of 4 "
                     "runs; the earlier ones ended otherwise",
                     "NVIDIA H100 80GB HBM3, torch 2.11.0, max 26.7.0: layout-contract/cuda fail where "
                     "layout-contract/cpu pass"]  # fmt: skip
    cpu_only = [row for row in ROWS if row.environment.get("gpu") == "cpu"]
    flipped = [dataclasses.replace(row, environment={**row.environment, "gpu": "NVIDIA H200"}) for row in cpu_only
               if row.environment.get("torch") == "2.6.0"]  # fmt: skip
    gpu_only = device_disagreements([*cpu_only[:1], *flipped])
    assert any("custom-op/cpu pass on max 25.6.1, fail on max 25.7.0" in line and "GPU-only" in line
               for line in gpu_only)  # torch 2.6's float8 change, seen only on "GPU" rows here  # fmt: skip
