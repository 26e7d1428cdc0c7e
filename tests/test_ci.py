"""gpudoctor in CI and bug trackers: the JUnit report read back with a real JUnit parser (junitparser), the
Markdown report within a GitHub issue's limit, the pre-commit hook run by the real pre-commit, and the pytest
plugin run by pytester against real reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SYNTHETIC, run_cli
from junitparser import Error, Failure, JUnitXml, Skipped

from gpudoctor.report.codec import decode
from gpudoctor.report.junit import to_junit
from gpudoctor.report.text import GITHUB_BODY_LIMIT, to_markdown

FIXTURES = ROOT / "tests" / "fixtures"


def _parse(tmp_path: Path, text: str) -> JUnitXml:
    path = tmp_path / "report.xml"
    path.write_text(text, encoding="utf-8")
    return JUnitXml.fromfile(str(path))


def test_every_run_is_a_test_case_with_its_outcome(tmp_path: Path) -> None:
    report = decode(json.loads((FIXTURES / "h100-kernel-cpu-zeros.json").read_text()))
    xml = _parse(tmp_path, to_junit(report))
    (suite,) = list(xml)
    cases = {case.name: case for case in suite}
    assert set(cases) == {r.id for r in report.results}
    assert cases["kernel/cuda"].is_passed and cases["custom-op/cpu"].is_passed
    (failure,) = cases["kernel/cpu"].result
    assert isinstance(failure, Failure)
    assert "differs from your reference" in failure.message
    assert "fix (kernel-differs-from-reference):" in failure.message  # the finding that names this run
    assert "reproduce:" in failure.text
    assert suite.tests == len(cases) and suite.failures == 1 and suite.errors == 0


def test_a_crash_is_an_error_with_its_signal_and_step(tmp_path: Path) -> None:
    report = decode(json.loads((FIXTURES / "h100-kernel-host-indexing.json").read_text()))
    (suite,) = list(_parse(tmp_path, to_junit(report)))
    crashed = [case for case in suite if case.name.startswith("kernel/cuda")]
    (error,) = crashed[0].result
    assert isinstance(error, Error) and error.type == "SIGSEGV"
    assert "last step: call copy_first on cuda" in error.message


def test_the_doctor_writes_junit_beside_json_with_skips_and_crashes(tmp_path: Path) -> None:
    """A real run of the synthetic probes (a segfault, an abort, a skip, a flood of invalid UTF-8 ...)."""
    junit = tmp_path / "out" / "gpudoctor.xml"
    saved, markdown = tmp_path / "out" / "gpudoctor.json", tmp_path / "out" / "gpudoctor.md"
    completed = run_cli(
        "--json", "--probes", str(SYNTHETIC), "--jobs", "4", "--timeout", "20", "--junit", str(junit),
        "--save-json", str(saved), "--save-markdown", str(markdown),
    )  # fmt: skip
    document = json.loads(completed.stdout)
    assert json.loads(saved.read_text()) == document  # one run, the same report in every form
    assert markdown.read_text().startswith("## gpudoctor") and "**problems found**" in markdown.read_text()
    (suite,) = list(JUnitXml.fromfile(str(junit)))
    cases = {case.name: case for case in suite}
    assert set(cases) >= {r["id"] for r in document["results"]}
    outcome = {r["id"]: r["outcome"] for r in document["results"]}
    for run_id, case in cases.items():
        if run_id not in outcome:
            continue
        kinds = {type(r) for r in case.result}
        expected = {"pass": set(), "skipped": {Skipped}, "interrupted": {Skipped}, "crash": {Error},
                    "fail": {Failure}, "timeout": {Failure}}[outcome[run_id]]  # fmt: skip
        assert kinds == expected, (run_id, outcome[run_id], kinds)
    assert cases["segfaults"].result[0].type == "SIGSEGV"
    assert junit.stat().st_mode & 0o777 == 0o644


def test_markdown_fits_a_github_issue_whatever_the_stderr() -> None:
    """The recorded H100 crash, with every run given 200 KB of stderr (one line of 50 KB among them): the summary
    comes first, stderr sits in <details>, and the body stays under GitHub's limit."""
    import dataclasses

    report = decode(json.loads((FIXTURES / "h100-kernel-host-indexing.json").read_text()))
    noisy = "x" * 50_000 + "\n" + "\n".join(f"line {n} of a very chatty probe" for n in range(6000))
    report = dataclasses.replace(
        report, results=tuple(dataclasses.replace(r, stderr_tail=noisy) for r in report.results)
    )
    markdown = to_markdown(report)
    assert len(markdown) <= GITHUB_BODY_LIMIT
    lines = markdown.splitlines()
    assert lines[0].startswith("## gpudoctor") and lines[2].startswith("**problems found**: 4 probe runs")
    assert "<details><summary>stderr (tail)</summary>" in markdown
    assert "x" * 1000 not in markdown  # the 50 KB line is cut
    many = dataclasses.replace(report, results=report.results * 200)  # 800 runs: cut, with a note
    cut = to_markdown(many)
    assert len(cut) <= GITHUB_BODY_LIMIT and "cut to fit GitHub's 65,536-character limit" in cut


def test_the_pre_commit_hook_checks_matrix_rows(tmp_path: Path) -> None:
    """The real pre-commit, `try-repo` on this checkout, in a fresh git repository holding a good row and then
    also a bad one: passes, then fails naming the bad file and field."""
    import os
    import shutil
    import subprocess

    repo = tmp_path / "rows-repo"
    rows = repo / "matrix" / "rows"
    rows.mkdir(parents=True)
    good = sorted((ROOT / "matrix" / "rows").glob("*.toml"))[0]
    shutil.copy(good, rows / good.name)
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}  # fmt: skip
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), **who}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    def try_repo() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "gpudoctor-matrix-check", "--all-files"],
            cwd=repo, env=env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "a good row")
    passed = try_repo()
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert "gpudoctor matrix check" in passed.stdout and "Passed" in passed.stdout
    bad = rows / "cpu_torch-2.13.0_max-26.7.0_000000000000.toml"
    bad.write_text(good.read_text().replace("schema = ", 'colour = "blue"\nschema = ', 1))
    git("add", ".")
    failed = try_repo()
    assert failed.returncode == 1, failed.stdout[-3000:]
    assert "Failed" in failed.stdout and bad.name in failed.stdout


pytest_plugins = ("pytester",)

USER_TESTS = """
import pytest


@pytest.mark.gpu_stack("kernel/cuda")
def test_my_kernel_on_the_gpu():
    pass  # on the recorded H100 this part of the stack crashed: the test must be skipped, never run


@pytest.mark.gpu_stack("custom-op")
def test_the_control_op():
    pass


def test_without_a_marker():
    pass
"""


def test_the_pytest_plugin_skips_tests_whose_stack_is_broken(pytester: pytest.Pytester) -> None:
    """A recorded real report (the H100 run where a kernel's execute() touches device memory from the host):
    the test that needs kernel/cuda is skipped with the doctor's explanation; the others run."""
    pytester.makepyfile(USER_TESTS)
    report = FIXTURES / "h100-kernel-host-indexing.json"
    result = pytester.runpytest("-rs", "--gpudoctor-report", str(report))
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*gpudoctor: kernel/cuda crash: killed by SIGSEGV*"])
    plain = pytester.runpytest()  # without the option the marker changes nothing
    plain.assert_outcomes(passed=3)


def test_the_pytest_plugin_runs_the_doctor_once_for_the_session(pytester: pytest.Pytester) -> None:
    """`pytest --gpudoctor` on this machine (a real doctor run, torch-env only): no CUDA device here, so a test
    that needs torch-env/cuda is skipped with the doctor's reason, and one that needs torch-env/cpu runs."""
    pytester.makepyfile(
        """
import pytest


@pytest.mark.gpu_stack("torch-env/cuda")
def test_needs_cuda():
    pass


@pytest.mark.gpu_stack("torch-env/cpu")
def test_needs_torch():
    pass
"""
    )
    result = pytester.runpytest_subprocess("-rs", "--gpudoctor", "--gpudoctor-args=--only torch-env")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*gpudoctor did not run torch-env/cuda here: no CUDA device*"])


def test_a_bad_report_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(USER_TESTS)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = pytester.runpytest("--gpudoctor-report", str(bad))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*not a gpudoctor --json report*"])


def _gpudoctor_commands(text: str) -> list[list[str]]:
    """Every `gpudoctor ...` command line in a text (the action's steps, the docs' snippets)."""
    import re
    import shlex

    text = text.replace("${{ inputs.args }} ", "")
    return [shlex.split(m.group(1)) for m in re.finditer(r"(?:^|\s|-m )gpudoctor (--[^\n\\|]*)", text)]


def test_the_action_and_the_ci_snippets_are_valid_and_use_real_options() -> None:
    """action.yml and every YAML block in docs/ci.md parse; every gpudoctor command in them is accepted by the
    real argument parser (an option renamed in the CLI would break this test, not a user's CI)."""
    import re

    import yaml

    from gpudoctor.cli.doctor_command import build_parser

    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    uses = [step.get("uses", "") for step in action["runs"]["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert any(u.startswith("EnricoMi/publish-unit-test-result-action") for u in uses)
    docs = (ROOT / "docs" / "ci.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", docs, flags=re.DOTALL)
    assert len(blocks) >= 4
    for block in blocks:
        yaml.safe_load(block)
    commands = _gpudoctor_commands((ROOT / "action.yml").read_text()) + _gpudoctor_commands(docs)
    assert len(commands) >= 3
    for argv in commands:
        build_parser().parse_args(argv)  # raises on an unknown or malformed option
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hooks[0]["id"] == "gpudoctor-matrix-check" and hooks[0]["entry"] == "gpudoctor matrix check"


def test_the_ci_workflow_runs_exactly_the_readmes_test_command_on_the_oldest_supported_python() -> None:
    """.github/workflows/ci.yml parses, runs on pushes and pull requests on Ubuntu, sets up the Python that
    requires-python names as the oldest, and runs one command: the one the README gives for the tests."""
    import re
    import tomllib

    import yaml

    readme = (ROOT / "README.md").read_text()
    (said,) = re.findall(r"^(scripts/dev\.sh test)\s+# run the tests", readme, flags=re.MULTILINE)
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    assert {"push", "pull_request"} <= set(workflow[True])  # YAML 1.1 reads the key `on` as True
    (job,) = workflow["jobs"].values()
    assert job["runs-on"].startswith("ubuntu-")
    runs = [step["run"] for step in job["steps"] if "run" in step]
    assert runs == [said]
    (setup,) = [step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python@")]
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == f">={setup['with']['python-version']}"


def test_ruff_targets_the_oldest_python_the_project_supports() -> None:
    """ruff's target-version is requires-python's floor: the lint suggests nothing the oldest supported Python lacks
    and misses nothing it has."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    floor = project["project"]["requires-python"].removeprefix(">=")
    assert project["tool"]["ruff"]["target-version"] == "py" + floor.replace(".", "")
