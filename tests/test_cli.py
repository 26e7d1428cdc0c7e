"""The CLI as users and CI run it: real subprocesses, real exit codes, JSON validated against the schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import ROOT, run_cli, validate_report


def test_inventory_only_json_on_a_machine_without_driver() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}  # no pre-flight notice from the machine
    completed = run_cli("--json", "--no-probes", env=env)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    validate_report(document)
    environment = document["environment"]
    assert environment["driver"]["status"] == "no NVIDIA driver"
    assert environment["driver"]["gpus"] == []
    from importlib.metadata import version

    assert environment["packages"]["torch"] == version("torch")
    assert environment["packages"]["max"] == version("max")
    assert environment["packages"]["nvidia-ml-py"] == version("nvidia-ml-py")
    assert environment["platform"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert document["results"] == [] and document["findings"] == []


def test_full_default_run_is_schema_valid_and_exit_code_matches(default_suite: tuple[int, dict[str, Any]]) -> None:
    returncode, document = default_suite
    validate_report(document)
    problems = [r["id"] for r in document["results"] if r["outcome"] in ("fail", "crash", "timeout")]
    assert returncode == (1 if problems else 0)


def test_synthetic_crashes_exit_1_and_stay_schema_valid(synthetic_dir: Path) -> None:
    completed = run_cli("--json", "--probes", str(synthetic_dir), "--jobs", "4")
    assert completed.returncode == 1
    document = json.loads(completed.stdout)
    validate_report(document)
    crash = next(r for r in document["results"] if r["id"] == "segfaults")
    assert crash["outcome"] == "crash" and crash["signal"] == "SIGSEGV"
    assert crash["command"].endswith("segfaults.py")


def test_passing_subset_exits_0(synthetic_dir: Path) -> None:
    completed = run_cli("--json", "--probes", str(synthetic_dir), "--only", "passes")
    assert completed.returncode == 0, completed.stdout
    assert [r["outcome"] for r in json.loads(completed.stdout)["results"]] == ["pass", "skipped"]


def test_markdown_report_shows_crash_details(synthetic_dir: Path) -> None:
    completed = run_cli("--markdown", "--probes", str(synthetic_dir), "--only", "segfaults", "--only", "bad-utf8")
    assert completed.returncode == 1
    text = completed.stdout
    assert "| segfaults | CRASH |" in text
    assert "Reproduce:" in text and "segfaults.py" in text
    assert "in string_at" in text
    assert "\x1b" not in text  # the escape sequence the probe printed is not passed through


def test_plain_text_output(synthetic_dir: Path) -> None:
    completed = run_cli("--probes", str(synthetic_dir), "--only", "raises")
    assert completed.returncode == 1
    assert "FAIL" in completed.stdout and "KeyError" in completed.stdout
    assert "reproduce:" in completed.stdout


def test_usage_errors_exit_2_with_one_line(synthetic_dir: Path, tmp_path: Path) -> None:
    for args in (
        ["--jobs", "0"],
        ["--json", "--markdown"],
        ["--only", "no-such-probe", "--probes", str(synthetic_dir)],
        ["--probes", str(tmp_path)],
        ["--python", "/nonexistent/python3"],
    ):
        completed = run_cli(*args)
        assert completed.returncode == 2, (args, completed.stdout, completed.stderr)
        assert completed.stdout == ""
        last = completed.stderr.strip().splitlines()[-1]
        assert "error" in last, (args, completed.stderr)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "catalog.toml").write_text('[[probe]]\nid = "x"\nscript = "x.py"\ntitle = "t"\n')
    completed = run_cli("--probes", str(bad))
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        f"gpudoctor: error: {bad / 'catalog.toml'}: probe #1 (x): field 'script' names 'x.py', which does not exist"
    )


def test_home_paths_are_redacted_in_json() -> None:
    home = os.path.expanduser("~")
    env = dict(os.environ, LD_LIBRARY_PATH=f"{home}/cuda/lib64", MODULAR_HOME=f"{home}/.modular")
    completed = run_cli("--json", "--no-probes", env=env)
    document = json.loads(completed.stdout)
    assert document["environment"]["env_vars"]["LD_LIBRARY_PATH"] == "~/cuda/lib64"
    assert home + "/" not in completed.stdout


def test_examines_another_interpreter(tmp_path: Path) -> None:
    """--python points the inventory and the probes at another environment (here: one without torch)."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    completed = run_cli("--json", "--python", str(venv / "bin" / "python"))
    document = json.loads(completed.stdout)
    validate_report(document)
    assert document["environment"]["packages"]["torch"] is None
    results = {r["id"]: r for r in document["results"]}
    assert results["torch-env/cpu"]["skip_reason"] == "missing package: torch"
    assert completed.returncode == 0


def test_doctor_process_never_imports_torch_or_max() -> None:
    """The doctor's own process runs the whole default suite without importing torch or MAX."""
    code = (
        "import sys\n"
        "from gpudoctor.program import main\n"
        "rc = main(['--json'])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'max', 'cuda', 'cffi', 'textual'))\n"
        "maps = open('/proc/self/maps').read()\n"
        "assert 'libcuda.so' not in maps, 'CUDA was loaded'\n"
        "print('IMPORTED', bad, file=sys.stderr)\n"
        "sys.exit(3 if bad else rc)\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert "IMPORTED []" in completed.stderr, completed.stderr[-2000:]
    assert completed.returncode in (0, 1)
    assert json.loads(completed.stdout)["results"], "the suite ran probes"


def test_help_names_every_command_of_the_table_and_each_command_has_its_own_help() -> None:
    """`gpudoctor --help` lists every command the table holds (run, bisect and patch included), and each name runs
    the module the table gives it: its own --help names it."""
    from gpudoctor.cli import COMMANDS

    assert {"kernel", "run", "bisect", "patch", "scan", "matrix", "sweep", "fleet"} <= set(COMMANDS)
    completed = run_cli("--help")
    assert completed.returncode == 0, completed.stderr
    listed = completed.stdout.split("commands (each has --help):\n", 1)[1].splitlines()
    assert [line.split()[1] for line in listed] == list(COMMANDS)
    for name, info in COMMANDS.items():
        assert info.summary in completed.stdout
        own = run_cli(name, "--help")
        assert own.returncode == 0 and own.stdout.startswith(f"usage: gpudoctor {name}"), (name, own.stderr)
