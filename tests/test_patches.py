"""`gpudoctor patch`: a verified workaround put into another environment and taken out again, for real."""

from __future__ import annotations

import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest
from conftest import run_cli, synthetic_copy

from gpudoctor.doctor import DoctorOptions, diagnose
from gpudoctor.model import Outcome, ProbeResult
from gpudoctor.suite.plan import PlannedRun

IMPORT_BRIDGE = "import max.experimental.torch as bridge; print('bridge imports')"


def _environment(tmp_path: Path) -> Path:
    """A fresh virtual environment that sees this one's torch and MAX (a .pth), with a sitecustomize that takes
    torch.float8_e8m0fnu away, as torch 2.6 lacks it."""
    target = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())  # fmt: skip
    (site / "inherit.pth").write_text(sysconfig.get_path("purelib") + "\n")
    (site / "sitecustomize.py").write_text("import torch\ndel torch.float8_e8m0fnu\n")
    return python


def test_install_makes_the_bridge_import_and_remove_undoes_it(tmp_path: Path) -> None:
    python = _environment(tmp_path)
    before = subprocess.run([python, "-c", IMPORT_BRIDGE], capture_output=True, text=True)
    assert before.returncode != 0 and "float8_e8m0fnu" in before.stderr

    installed = run_cli("patch", "install", "float8-e8m0fnu-alias", "--python", str(python))
    assert installed.returncode == 0, installed.stderr
    written = [line.removeprefix("wrote ") for line in installed.stdout.splitlines() if line.startswith("wrote ")]
    assert sorted(Path(p).name for p in written) == [
        "gpudoctor-patches.pth", "gpudoctor_patch_float8.py", "gpudoctor_patches.py"
    ]  # fmt: skip
    assert "gpudoctor patch remove float8-e8m0fnu-alias --python" in installed.stdout
    after = subprocess.run([python, "-c", IMPORT_BRIDGE], capture_output=True, text=True)
    assert after.returncode == 0, after.stderr
    assert "bridge imports" in after.stdout and "aliased it to" in after.stderr  # the patch says what it did
    quiet = subprocess.run([python, "-c", "import sys; print('torch' in sys.modules)"], capture_output=True, text=True)
    assert quiet.stdout.strip() == "True"  # (sitecustomize imports torch here; the hook itself imports nothing)

    removed = run_cli("patch", "remove", "float8-e8m0fnu-alias", "--python", str(python))
    assert removed.returncode == 0 and removed.stdout.count("removed ") == 3
    assert all(not Path(p).exists() for p in written)
    again = subprocess.run([python, "-c", IMPORT_BRIDGE], capture_output=True, text=True)
    assert again.returncode != 0 and "float8_e8m0fnu" in again.stderr


def test_the_hook_imports_nothing_at_interpreter_start(tmp_path: Path) -> None:
    target = tmp_path / "bare"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    assert run_cli("patch", "install", "float8-e8m0fnu-alias", "--python", str(python)).returncode == 0
    started = subprocess.run(
        [python, "-c", "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'max')))"],
        capture_output=True,
        text=True,
    )
    assert started.returncode == 0 and started.stdout.strip() == "[]"


def test_show_prints_the_snippet_to_paste_and_an_unknown_patch_is_a_usage_error() -> None:
    shown = run_cli("patch", "show", "float8-e8m0fnu-alias")
    assert shown.returncode == 0 and "def apply()" in shown.stdout
    unknown = run_cli("patch", "install", "no-such-patch")
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


FAILS_AS_TORCH_2_6 = 'script = "lacks_float8.py"\ntitle = "fails as torch 2.6 makes MAX\'s bridge fail"\nstage = 1\n'
FLOAT8_CATALOG = "".join(
    f'[[probe]]\nid = "{probe}"\n{FAILS_AS_TORCH_2_6}\n'
    for probe in ("max-import", "graph-op", "custom-op", "custom-op-source")
) + (
    '[[probe]]\nid = "after-import"\nscript = "passes.py"\ntitle = "builds on max-import"\nstage = 2\n'
    'details = ["answer"]\nafter = ["max-import"]\n'
)


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        running += step
        most = max(most, running)
    return most


def test_verifying_reruns_honour_jobs_and_faces_see_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four runs fail as a torch without float8_e8m0fnu makes MAX's bridge fail: each is rerun with the float8 patch
    as a run of the same schedule — never more probe processes at once than --jobs, side by side rather than one
    at a time — and the face hears every rerun start and end, labelled; the report is as before: the fixed runs
    keep their real failing result, the finding says the patch fixed all four, what it unblocked runs on."""
    probes = synthetic_copy(tmp_path, FLOAT8_CATALOG)
    spans_dir = tmp_path / "spans"
    spans_dir.mkdir()
    monkeypatch.setenv("GPUDOCTOR_TEST_SPANS", str(spans_dir))
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    started: list[PlannedRun] = []
    heard: list[ProbeResult] = []
    report = diagnose(
        DoctorOptions(probe_dir=probes, jobs=2, advice=False), on_start=started.append, on_result=heard.append
    )

    label = "with patch float8-e8m0fnu-alias"
    failing = ["max-import", "graph-op", "custom-op", "custom-op-source"]
    assert sorted(run.run_id for run in started if run.label == label) == sorted([*failing, "after-import"])
    patched = [result for result in heard if result.summary.startswith(label + ": ")]
    assert sorted(r.id for r in patched) == sorted([*failing, "after-import"])
    assert all(r.outcome is Outcome.PASS and r.details["patches_applied"] == ["float8.py"] for r in patched)

    spans = [line.split() for path in spans_dir.iterdir() for line in path.read_text().splitlines()]
    assert sorted(kind for kind, _, _ in spans) == ["as-is"] * 4 + ["patched"] * 4
    assert _most_at_once([(float(start), float(end)) for _, start, end in spans]) == 2  # --jobs 2, and used
    reruns = [(float(start), float(end)) for kind, start, end in spans if kind == "patched"]
    assert _most_at_once(reruns) == 2  # the verifying reruns themselves ran two at a time

    outcomes = {r.id: r.outcome for r in report.results}
    assert outcomes == {**dict.fromkeys(failing, Outcome.FAIL), "after-import": Outcome.PASS}
    carried = report.result("after-import")
    assert carried is not None and carried.summary == f"{label}: 1 + 1 == 2"
    (finding,) = [f for f in report.findings if f.id == "torch-lacks-float8-e8m0fnu"]
    assert finding.runs == tuple(failing) and finding.patch_verified is True
    assert finding.patch_note is not None
    assert finding.patch_note.startswith("fixed by patch float8-e8m0fnu-alias: max-import rerun with the patch: pass")
    assert finding.patch_note.count(" rerun with the patch: pass (torch.float8_e8m0fnu is there") == 4
