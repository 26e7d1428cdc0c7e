"""The version-aware source check: rules as data verified on real releases, the release estimate, the real
compiler's diagnostics translated, and `gpudoctor scan`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, run_cli

from gpudoctor.errors import GpuDoctorError
from gpudoctor.facts.inventory import collect_environment
from gpudoctor.kernel.source import check_source, load_rules, shipped_rules, translate
from gpudoctor.kernel.source.check import changes_between
from gpudoctor.knowledge import load_knowledge, match_findings
from gpudoctor.model import Device, Outcome, ProbeResult, Report

KERNELS = ROOT / "kernels"


def test_every_rule_is_verified_and_the_committed_verification_agrees_with_the_rules() -> None:
    book = shipped_rules()
    table = (ROOT / "docs" / "source-rules.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| rule | accepted |"))
    releases = [cell.strip() for cell in header.strip("|").split("|")[2:]]
    assert releases == list(book.releases)  # verified on every release the estimate uses
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([\w-]+)` \| `[^`]*` \| (.*) \|$", table, re.M)}
    for rule in book.rules:
        assert rule.sample or rule.verified, rule.id
        if rule.sample is None or rule.package != "max":
            continue
        marks = [cell.strip() for cell in rows[rule.id].split("|")]
        observed = [mark.startswith("✓") for mark in marks]
        assert "!" not in "".join(marks), rule.id
        assert observed == [rule.accepts(r) for r in releases], rule.id
        if rule.language == "mojo":  # (Python samples ask for the module without importing it)
            assert rule.match.search(rule.sample), f"{rule.id}: its own sample does not match"


@pytest.mark.parametrize(
    ("generation", "written_for"),
    [
        ("legacy", ("25.3.0", "26.1.0")),
        ("max26.2", ("25.3.0", "26.3.0")),  # `...` tensor types already compile on 26.1 and older
        ("max26.4", ("26.4.0", "26.4.0")),
        ("max26.5", ("26.5.0", "26.6.0")),
        ("mojo1", ("26.7.0", "26.7.0")),
    ],
)
def test_the_release_estimate_of_each_control_generation(generation: str, written_for: tuple[str, str]) -> None:
    check = check_source(KERNELS / generation / "control", {"max": "26.7.0"})
    assert (check.written_for[0], check.written_for[-1]) == written_for and check.conflicts == 0
    assert bool(check.rejected()) == (generation != "mojo1")


def test_changes_between_two_releases_name_every_line_with_its_rewrite() -> None:
    check = check_source(KERNELS / "max26.4" / "control", {"max": "26.7.0"})
    moved = changes_between(check, "26.4.0", "26.7.0")
    assert {(h.file, h.rule.id) for h in moved} == {
        ("add_one.mojo", "mojo-std-gpu-host"),
        ("scale.mojo", "mojo-std-gpu-host"),
        ("add_one.mojo", "mojo-foreach-function-as-parameter"),
        ("scale.mojo", "mojo-foreach-function-as-parameter"),
    }
    statement = next(h for h in moved if h.rule.id == "mojo-std-gpu-host").statement("26.7.0")
    assert "not accepted since max 26.5" in statement and "from max.gpu.host import DeviceContext" in statement


def test_python_rules_follow_their_own_package_and_feature_detection_is_not_flagged(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_text(
        "from cuda import cuda, nvrtc\nimport cuda.core.experimental as cx\n# from max.torch import graph_op\n"
        "version = cx.system.get_driver_version()\nfrom max.torch import CustomOpLibrary\n"
    )
    (tmp_path / "both.py").write_text(
        "try:\n    from max.experimental.torch import CustomOpLibrary\nexcept ImportError:\n"
        "    from max.torch import CustomOpLibrary\n"
    )
    installed = {"max": "26.7.0", "cuda-python": "13.0.1", "cuda-core": "1.0.0"}
    check = check_source(tmp_path, installed)
    rejected = {(h.file, h.line, h.rule.id) for h in check.rejected()}
    assert rejected == {
        ("old.py", 1, "python-from-cuda-import-cuda"),
        ("old.py", 2, "python-cuda-core-experimental"),
        ("old.py", 4, "python-cuda-core-get-driver-version"),
        ("old.py", 5, "python-max-torch"),
    }  # the commented line is skipped; both.py detects the release itself
    older = check_source(tmp_path, {"max": "26.1.0", "cuda-python": "12.9.0", "cuda-core": "0.3.2"})
    assert older.rejected() == ()
    assert check_source(tmp_path, {"max": None}).rejected() == ()  # nothing installed, nothing to say


def _compiled(tmp_path: Path, source: str) -> tuple[Path, list[str]]:
    """A package holding ``source``, compiled by the dev environment's real mojo, which must reject it: the package
    and the compiler's error lines."""
    mojo = shutil.which("mojo", path=str(Path(sys.executable).parent))
    assert mojo, "the dev environment installs MAX, and with it mojo"
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.mojo").write_text("")
    (package / "ops.mojo").write_text(source)
    compiled = subprocess.run(
        [mojo, "precompile", str(package), "-o", str(tmp_path / "o.mojoc")], capture_output=True, text=True
    )
    diagnostics = [line for line in (compiled.stdout + compiled.stderr).splitlines() if ": error: " in line]
    assert compiled.returncode != 0 and diagnostics
    return package, diagnostics


def test_the_real_compilers_generic_diagnostics_are_translated(tmp_path: Path) -> None:
    package, diagnostics = _compiled(
        tmp_path, "def take(owned x: Int) -> Int:\n    return x\n\n\nfn twice(x: Int) -> Int:\n    return 2 * x\n"
    )
    assert any("expected ')' in argument list" in d for d in diagnostics)
    check = check_source(package, {"max": "26.7.0"})
    said = {t.hit.rule.id: t.statement() for t in translate(diagnostics, check)}
    assert "mojo-owned" in said and "mojo-fn-keyword" in said
    assert (
        "the compiler's \"ops.mojo:1: expected ')' in argument list\" is `def take(owned x: Int) -> Int:`"
        in said["mojo-owned"]
    )
    assert "not accepted since max 26.2; write: var x: T" in said["mojo-owned"]
    assert check.written_for == ("25.3.0", "25.4.0", "25.5.0", "25.6.0", "25.6.1", "25.7.0", "26.1.0")
    # The same real diagnostic, as a kernel run reports it, is the field report mojo-keyword-churn reproduced.
    result = ProbeResult(
        id="kernel/cpu", probe="kernel", device=Device.CPU, outcome=Outcome.FAIL, duration_s=1.0,
        summary="CompileFailed: the Mojo compiler rejected pkg", message=" | ".join(diagnostics),
    )  # fmt: skip
    environment = collect_environment()
    report = Report(
        doctor_version="test", created="2026-11-23T00:00:00+00:00", environment=environment, results=(result,)
    )
    issue = next(i for i in load_knowledge() if i.id == "mojo-keyword-churn")
    assert issue.shown == "reproduced here"
    assert "mojo-keyword-churn" in {f.id for f in match_findings(report, [issue])}


def test_scan_command_faces_and_exit_codes() -> None:
    legacy = run_cli("scan", str(TESTS / "kernels" / "legacy_syntax"))
    assert legacy.returncode == 1
    assert "Written for: MAX 25.3.0 - 26.1.0" in legacy.stdout
    assert "copy_first.mojo:10: fn execute[" in legacy.stdout and "not accepted since max 26.4" in legacy.stdout
    assert "gpudoctor sweep --torch 2.13.0 --max 26.1.0 --kernel" in legacy.stdout
    document = json.loads(run_cli("scan", str(KERNELS / "mojo1" / "control"), "--max", "26.5.0", "--json").stdout)
    not_yet = {h["rule"] for h in document["hits"] if h["accepted_here"] is False}
    assert not_yet == {"mojo-foreach-function-as-argument"}  # layout.Coord and capture lists exist on 26.5
    assert document["written_for"] == ["26.7.0"] and "--max 26.7.0 --kernel" in document["run_there"]
    markdown = run_cli("scan", str(KERNELS / "max26.5" / "control"), "--markdown")
    assert (
        markdown.returncode == 1
        and "| `add_one.mojo:23` `foreach[add_one, target=target](output, ctx)` |" in markdown.stdout
    )
    assert run_cli("scan", str(KERNELS / "mojo1" / "control")).returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scan", "/no/such/place"], "/no/such/place: no such file or directory"),
        (["scan", str(KERNELS), "--max", "latest"], "--max 'latest': not a version like 26.7.0"),
        (["scan", str(KERNELS), "--python", "/no/python"], "--python /no/python: no such interpreter"),
    ],
)
def test_scan_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    completed = run_cli(*args)
    assert completed.returncode == 2 and message in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1 and completed.stdout == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('releases = ["26.7.0"]\n[[rule]]\nid = "x"\n', "missing field 'accepted'"),
        (
            'releases = ["26.7.0"]\n[[rule]]\nid = "x"\nlanguage = "mojo"\nconstruct = "c"\nmatch = "("\n'
            'accepted = "<1"\nrewrite = "r"\nsample = "s"\n',
            "field 'match': not a regular expression",
        ),
        (
            'releases = ["26.7.0"]\n[[rule]]\nid = "x"\nlanguage = "mojo"\nconstruct = "c"\nmatch = "a"\n'
            'accepted = "soon"\nrewrite = "r"\nsample = "s"\n',
            "field 'accepted' is not a version specifier",
        ),
        (
            'releases = ["26.7.0"]\n[[rule]]\nid = "x"\nlanguage = "mojo"\nconstruct = "c"\nmatch = "a"\n'
            'accepted = "<1"\nrewrite = "r"\n',
            "needs a 'sample' to verify it by",
        ),
    ],
)
def test_malformed_rules_name_the_rule_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    with pytest.raises(GpuDoctorError, match=re.escape(message)):
        load_rules(path)


def test_module_moves_and_removed_decorators_from_the_changelogs_get_their_rewrite(tmp_path: Path) -> None:
    """A kernel of the 25.x era (unprefixed gpu and std modules, @value, @register_passable) compiled with the real
    26.7 compiler: each diagnostic becomes the rule's rewrite and the release it stopped being accepted — not "fix
    the first error"."""
    package, diagnostics = _compiled(
        tmp_path,
        "from gpu import thread_idx\nfrom math import ceildiv\n\n\n@value\nstruct Pair:\n    var a: Int\n\n\n"
        '@register_passable("trivial")\nstruct Small:\n    var x: Int\n',
    )
    check = check_source(package, {"max": "26.7.0"})
    rejected = {hit.rule.id for hit in check.rejected()}
    assert {"mojo-gpu-unprefixed", "mojo-math-unprefixed", "mojo-value-decorator", "mojo-register-passable"} <= rejected
    said = {t.hit.rule.id: t.statement() for t in translate(diagnostics, check)}
    assert said, diagnostics  # the compiler's own words are tied to a rule, with its rewrite
    assert all("not accepted since max" in statement and "write:" in statement for statement in said.values())
    assert check.written_for == ("25.3.0", "25.4.0", "25.5.0")  # @value was removed in 25.6
