"""`gpudoctor explain`: real logs quoted from public reports (the field corpora, each with its source) explained in
every face against this machine's inventory; hostile input (binary, 1 GB, invalid UTF-8, a FIFO) is one line and exit
2; terminal control characters never reach the terminal; nothing private is written."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from conftest import TESTS, run_cli

CORPUS = {r["id"]: r for r in tomllib.loads((TESTS / "field_corpus" / "corpus.toml").read_text())["report"]}
FAULTS = {r["id"]: r for r in tomllib.loads((TESTS / "field_corpus" / "faults.toml").read_text())["report"]}


def _explain(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    log = tmp_path / "job.log"
    log.write_text(text)
    completed = run_cli("explain", str(log), *args, timeout=120)
    return completed.returncode, completed.stdout, completed.stderr


def test_a_public_report_is_explained_in_json_and_markdown(tmp_path: Path) -> None:
    quote = CORPUS["triton-sm121a-bundled-ptxas"]["quote"]  # triton-lang/triton#8539
    rc, out, err = _explain(tmp_path, "CI job 1234\n" * 50 + quote + "cleanup done\n", "--json")
    assert rc == 1, err
    report = json.loads(out)
    (result,) = report["results"]
    assert result["id"] == "log" and result["outcome"] == "fail"
    assert "ptxas-does-not-know-gpu-arch-triton" in {f["id"] for f in report["findings"]}
    rc, out, _ = _explain(tmp_path, quote, "--markdown")
    assert rc == 1 and "Triton's ptxas does not know sm_121a" in out


def test_a_fault_from_a_users_program_and_an_unknown_one(tmp_path: Path) -> None:
    rc, out, _ = _explain(tmp_path, FAULTS["torch-nanogpt-emb-device-assert"]["quote"], "--json")
    assert rc == 1 and any(f["id"].startswith("cuda-device-assert") for f in json.loads(out)["findings"])
    rc, out, _ = _explain(
        tmp_path, "Traceback (most recent call last):\nValueError: the moon is made of cheese\n", "--json"
    )
    (generic,) = [f for f in json.loads(out)["findings"] if f["id"] == "not-a-known-failure"]
    assert "then gpudoctor run -- your command, which reads the phase" in generic["evidence"][0]
    assert "compute-sanitizer" not in generic["evidence"][0]  # no phase shows: no run-time instrument is guessed


def test_only_the_parts_around_the_errors_of_a_long_log_are_read() -> None:
    from gpudoctor.reproducer.log import KEPT_BYTES, relevant_part

    noise = "".join(f"step {n}: compiling module {n}\n" for n in range(40000))
    text = noise + "RuntimeError: CUDA error: an illegal memory access was encountered\n" + noise
    part = relevant_part(text)
    assert len(part) <= KEPT_BYTES and "an illegal memory access" in part


def test_hostile_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    binary = tmp_path / "core"
    binary.write_bytes(b"\x7fELF\x00\x01\x02" * 1000)
    huge = tmp_path / "huge.log"
    with huge.open("wb") as handle:  # a sparse 1 GB file: nothing of it is read past the limit
        handle.truncate(1 << 30)
    latin = tmp_path / "latin1.log"
    latin.write_bytes("Fehler: Ger\xe4t nicht gefunden\n".encode("latin-1"))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path, words in ((binary, "binary"), (huge, "larger than"), (latin, "not UTF-8"), (fifo, "not a regular file"),
                        (tmp_path / "missing.log", "cannot read")):  # fmt: skip
        completed = run_cli("explain", str(path), timeout=60)
        assert completed.returncode == 2, (path, completed.stderr)
        assert words in completed.stderr and len(completed.stderr.strip().splitlines()) == 1, completed.stderr
        assert "Traceback" not in completed.stderr


def test_control_characters_never_reach_the_terminal_and_nothing_private_is_written(tmp_path: Path) -> None:
    log = (
        "\x1b[2J\x1b]0;owned\x07Traceback (most recent call last):\n"
        '  File "/home/alice/secret-project/train.py", line 3, in <module>\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered \x1b[31mred\x1b[0m\n"
    )
    rc, plain, _ = _explain(tmp_path, log, "--plain")
    assert rc == 1 and "\x1b" not in plain and "\x07" not in plain
    rc, out, _ = _explain(tmp_path, log, "--json")
    assert "alice" not in out and "cuda-kernel-fault" in {f["id"] for f in json.loads(out)["findings"]}


def test_the_interactive_view_needs_a_file_and_a_terminal(tmp_path: Path) -> None:
    """`explain --tui` reads the terminal for keys, so the log must come from a file; without a terminal it says so
    (the app itself is tested with Pilot in tests/test_tui.py)."""
    log = tmp_path / "ci.log"
    log.write_text("ModuleNotFoundError: No module named 'max.torch'\n")
    for args, words in ((["--tui", "-"], "give the log as a file"), (["--tui", str(log)], "--tui needs a terminal")):
        completed = run_cli("explain", *args, timeout=60)
        assert completed.returncode == 2, completed.stderr
        assert words in completed.stderr and len(completed.stderr.strip().splitlines()) == 1, completed.stderr
