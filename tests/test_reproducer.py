"""`gpudoctor run -- CMD`: real reproducers written as users write them (tests/reproducers), run as real processes
that really crash, hang and fail; the report read back in every face (JSON against the schema, Markdown, JUnit
with a real parser); native frames from the real gdb where this machine has it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
from pathlib import Path

from conftest import ROOT, run_cli, validate_report
from junitparser import Error, JUnitXml

from gpudoctor.report.codec import decode
from gpudoctor.reproducer import native

REPRODUCERS = ROOT / "tests" / "reproducers"
HAS_GDB = shutil.which("gdb") is not None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_segfault_in_a_thread_is_reported_with_python_and_native_frames_in_every_face(tmp_path: Path) -> None:
    junit, markdown = tmp_path / "run.xml", tmp_path / "run.md"
    completed = run_cli(
        "run", "--json", "--junit", str(junit), "--save-markdown", str(markdown), "--timeout", "120",
        "--", "python", str(REPRODUCERS / "segfault_in_thread.py"),
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr
    document = json.loads(completed.stdout)
    validate_report(document)
    (result,) = decode(document).results
    assert result.outcome.value == "crash" and result.signal == "SIGSEGV"
    assert "in string_at" in result.summary
    crashing = [f for f in result.frames if f.thread == "current"]
    assert [f.function for f in crashing[:2]] == ["string_at", "worker"]  # innermost first, in the worker thread
    assert any(f.function == "<module>" and f.thread != "current" for f in result.frames)  # the main thread too
    assert result.native is not None
    if HAS_GDB:
        assert "stopped on SIGSEGV" in result.native.how
        crash_frames = [f.function for f in result.native.frames if f.thread == "crashing thread"]
        assert "string_at" in crash_frames and any("start_thread" in f or "clone" in f for f in crash_frames)
        assert len({f.thread for f in result.native.frames}) >= 3  # the crashing thread, then each thread
        assert any("libpython" in p or "libc.so" in p for p in result.mapped_libraries)
    else:
        assert result.native.how == native.NO_DEBUGGER and result.native.frames == ()
    assert str(Path.home()) not in completed.stdout  # home paths redacted in what can be shared
    (case,) = next(iter(JUnitXml.fromfile(str(junit))))
    (error,) = case.result
    assert isinstance(error, Error) and error.type == "SIGSEGV"
    text = markdown.read_text()
    assert "Where it died:" in text and "Python, crashing thread:" in text
    assert "segfault_in_thread.py:11 in worker" in text


def test_a_hang_is_reported_with_every_threads_stack_and_nothing_is_left_running(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    started = time.monotonic()
    completed = run_cli(
        "run", "--json", "--timeout", "4", "--", sys.executable, str(REPRODUCERS / "hangs_on_a_lock.py"), str(pids)
    )
    assert completed.returncode == 1, completed.stderr
    (result,) = decode(json.loads(completed.stdout)).results
    assert result.outcome.value == "timeout"
    threads = {f.thread for f in result.frames}
    assert len(threads) == 2  # faulthandler's dump on SIGABRT: the main thread and the waiter
    assert {f.function for f in result.frames} >= {"waiter", "<module>"}
    if HAS_GDB:
        assert result.native is not None and "attached before the kill" in result.native.how
        assert len({f.thread for f in result.native.frames}) == 2
    child = int(pids.read_text().split()[0])
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the command's child outlived it"
    assert time.monotonic() - started < 110


def test_a_failing_script_is_a_failure_with_its_exception_and_a_passing_one_exits_0(tmp_path: Path) -> None:
    completed = run_cli("run", "--json", "--", "python", str(REPRODUCERS / "raises.py"))
    assert completed.returncode == 1
    (result,) = decode(json.loads(completed.stdout)).results
    assert result.outcome.value == "fail" and result.exception_type == "RuntimeError"
    assert "wrong result on numpy" in (result.message or "") and result.frames[0].function == "<module>"
    assert result.native is None  # no crash: nothing for a debugger to add
    ok = tmp_path / "ok.py"
    ok.write_text("print('fine')\n")
    passed = run_cli("run", "--plain", "--", "python", str(ok))
    assert passed.returncode == 0 and "pass     reproducer" in passed.stdout and "exited with status 0" in passed.stdout


def test_a_shell_reports_its_childs_signal_and_bad_input_is_one_line() -> None:
    aborts = f"{sys.executable} -c 'import os; os.abort()'"
    completed = run_cli("run", "--json", "--no-debugger", "--", "sh", "-c", aborts)
    (result,) = decode(json.loads(completed.stdout)).results
    assert result.outcome.value == "crash" and result.signal == "SIGABRT" and "a child process was" in result.summary
    for argv, said in ((["run"], "give the command after --"), (["run", "--"], "no command after --"),
                       (["run", "--timeout", "0", "--", "true"], "must be seconds above 0"),
                       (["run", "--tui", "--", "true"], "--tui needs a terminal")):  # fmt: skip
        failed = run_cli(*argv)
        assert failed.returncode == 2 and said in failed.stderr and "Traceback" not in failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1
    missing = run_cli("run", "--json", "--", "/nonexistent/command")
    assert missing.returncode == 1 and "could not start the command" in missing.stdout
    assert os.environ.get("PYTHONFAULTHANDLER") != "set by the test"  # the environment is the command's own copy


H100 = ROOT / "tests" / "fixtures" / "h100" / "reproducer"


def test_seed_000_run_and_bisected_on_the_h100_is_the_scripts_fault() -> None:
    """Recorded on the H100 (driver 580, torch 2.11 cu130) from a wheelhouse of MAX 25.4, 25.5 and 26.1 installed
    offline: seed 000's reproducer dies of SIGSEGV in _Model_execute on every release, and the bisect says so;
    `gpudoctor run` shows the Python frames of the dying process and the libcuda and libmax it had mapped (no gdb
    there: the report says so and how to get it). Here, the scan of the kernels beside the script, with the
    recorded crash, names the line at fault."""
    from gpudoctor.knowledge import load_knowledge, match_findings
    from gpudoctor.reproducer.command import HOST_INDEXING_DETAIL, Reproducer
    from gpudoctor.reproducer.subject import host_indexing_lines

    bisect = json.loads((H100 / "seed000-bisect.json").read_text())
    assert [(c["max"], c["way"]["outcome"], c["way"]["detail"]) for c in bisect["cells"]] == [
        ("25.4.0", "crash", "SIGSEGV"), ("25.5.0", "crash", "SIGSEGV"), ("26.1.0", "crash", "SIGSEGV"),
    ]  # fmt: skip
    assert bisect["transitions"] == [] and "the fault is most likely the script's" in bisect["verdict"][0]
    document = json.loads((H100 / "seed000-run.json").read_text())
    validate_report(document)
    report = decode(document)
    (result,) = report.results
    assert result.outcome.value == "crash" and result.signal == "SIGSEGV"
    assert "_Model_execute" in {f.function for f in result.frames}  # the seed's stack
    assert any("libcuda.so.580" in p for p in result.mapped_libraries)
    assert any(p.endswith("libmax.so") for p in result.mapped_libraries)
    assert result.native is not None and result.native.how == native.NO_DEBUGGER

    reproducer = Reproducer(("python", "tests/reproducers/seed000_host_indexing/repro.py", "cuda"), cwd=ROOT)
    lines = host_indexing_lines(reproducer)
    assert lines == ["tests/reproducers/seed000_host_indexing/kernels/copy_first.mojo:17: `output[0, 0] = "
                     "input[0, 0]` (op copy_first, outside foreach)"]  # fmt: skip
    scanned = dataclasses.replace(report, results=(
        dataclasses.replace(result, details={HOST_INDEXING_DETAIL: lines}),))  # fmt: skip
    (finding,) = [f for f in match_findings(scanned, load_knowledge()) if f.severity == "problem"]
    assert finding.id == "reproducer-kernel-indexes-device-tensor" and finding.runs == ("reproducer",)
    assert "copy_first.mojo:17" in finding.evidence[0]
    on_cpu = dataclasses.replace(scanned, environment=dataclasses.replace(
        report.environment, driver=dataclasses.replace(report.environment.driver, gpus=())))  # fmt: skip
    assert not [f for f in match_findings(on_cpu, load_knowledge()) if f.severity == "problem"]


def test_seed_002_on_cuda_bisected_on_the_h100() -> None:
    report = json.loads((H100 / "seed002-bisect.json").read_text())
    assert [(c["max"], c["verdict"]) for c in report["cells"]] == [("25.4.0", "bad"), ("25.5.0", "good")]
    bad = report["cells"][0]
    assert bad["way"]["detail"] == "AssertionError" and "the default factor=2 gave" in bad["summary"]
    assert "it was fixed 25.4.0 -> 25.5.0" in report["verdict"][0]
    for cells in ("seed000-cells", "seed002-cells"):
        for path in sorted((H100 / cells).glob("*.json")):
            validate_report(json.loads(path.read_text()))
