"""What the inventory keeps in gpudoctor's cache (gpudoctor.memo): program answers, the declared-requirements check and
the knowledge files' parse are reused only while what they were computed from is unchanged, and never across a change
of the program, the files it reads, the facts, the knowledge's text or gpudoctor's version. Real programs, real files.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import gpudoctor.memo
from gpudoctor.errors import GpuDoctorError
from gpudoctor.facts import answers, requirements
from gpudoctor.facts.answers import ask_program
from gpudoctor.facts.requirements import unmet_requirements
from gpudoctor.knowledge import load

MEMOS = (answers.ANSWERS, requirements.CHECKED, load.LOADED)


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("GPUDOCTOR_CACHE_DIR", str(cache))
    for memo in MEMOS:
        memo.forget()
    yield cache
    for memo in MEMOS:
        memo.forget()


def _program(tmp_path: Path, name: str, real: str) -> str:
    """A copy of a real compiled program (``real``, found on PATH) under ``name``."""
    found = shutil.which(real)
    assert found is not None
    target = tmp_path / "bin" / name
    target.parent.mkdir(exist_ok=True)
    shutil.copy2(found, target)
    return str(target)


def test_a_programs_answer_is_kept_until_the_program_changes(tmp_path: Path) -> None:
    date = _program(tmp_path, "date", "date")
    first = ask_program([date, "+%s.%N"], 10)
    assert first is not None and first.returncode == 0
    assert ask_program([date, "+%s.%N"], 10) == first  # kept: a second run would print another time
    answers.ANSWERS.forget()
    assert ask_program([date, "+%s.%N"], 10) == first  # and read back from the cache file by the next process
    shutil.copy2(_program(tmp_path, "false", "false"), date)  # another program at the same path
    changed = ask_program([date, "+%s.%N"], 10)
    assert changed is not None and changed.returncode == 1


def test_nothing_is_kept_across_a_change_of_gpudoctors_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    date = _program(tmp_path, "date", "date")
    first = ask_program([date, "+%s.%N"], 10)
    monkeypatch.setattr(gpudoctor.memo, "__version__", "0.0.0-another")
    assert ask_program([date, "+%s.%N"], 10) != first


def test_an_answer_read_from_a_file_changes_with_the_file(tmp_path: Path) -> None:
    cat = _program(tmp_path, "cat", "cat")
    listed = tmp_path / "ld.so.cache"
    listed.write_text("one\n")
    assert (answer := ask_program([cat, str(listed)], 10, reads=[str(listed)])) is not None and answer.stdout == "one\n"
    listed.write_text("two, longer\n")
    assert (answer := ask_program([cat, str(listed)], 10, reads=[str(listed)])) is not None
    assert answer.stdout == "two, longer\n"


def test_a_script_or_a_stand_in_for_another_program_is_asked_every_time(tmp_path: Path) -> None:
    """A wrapper script (nvcc exec'ing a toolkit's nvcc) answers for what it runs, and so does a program reached under
    another's name (ccache as gcc): neither is kept, since their own file does not change with the answer."""
    said = tmp_path / "said"
    script = tmp_path / "bin" / "nvcc"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\nexec cat {said}\n")
    script.chmod(0o755)
    stand_in = tmp_path / "bin" / "gcc"
    stand_in.symlink_to(_program(tmp_path, "cat", "cat"))
    for program in (str(script), str(stand_in)):
        said.write_text("release 12.4\n")
        argv = [program] if program == str(script) else [program, str(said)]
        assert (first := ask_program(argv, 10)) is not None and first.stdout == "release 12.4\n"
        said.write_text("release 13.0\n")
        assert (again := ask_program(argv, 10)) is not None and again.stdout == "release 13.0\n"
    assert not (gpudoctor.memo.cache_dir() / "memo" / "program-answers.json").exists()


MARKERS = {"python_version": "3.12", "sys_platform": "linux", "platform_machine": "x86_64"}


def test_the_requirements_check_is_kept_for_exactly_the_facts_it_was_made_from() -> None:
    installed = [["torch", "2.11.0", ["numpy>=2", "filelock"]], ["numpy", "1.26.4", []]]
    first = unmet_requirements(installed, MARKERS)
    assert [str(u) for u in first] == [
        "torch 2.11.0 requires numpy>=2, but numpy 1.26.4 is installed",
        "torch 2.11.0 requires filelock, which is not installed",
    ]
    requirements.CHECKED.forget()
    assert unmet_requirements(installed, MARKERS) == first  # read back
    assert (gpudoctor.memo.cache_dir() / "memo" / "requirements-unmet.json").is_file()
    upgraded = [["torch", "2.11.0", ["numpy>=2", "filelock"]], ["numpy", "2.1.0", []], ["filelock", "3.16", []]]
    assert unmet_requirements(upgraded, MARKERS) == []
    assert unmet_requirements(installed, {**MARKERS, "python_version": "3.9"}) == first


def test_the_knowledge_read_back_is_the_knowledge_parsed_and_a_changed_file_is_checked_again(tmp_path: Path) -> None:
    parsed = load.load_knowledge.__wrapped__()
    load.LOADED.forget()
    kept = load.load_knowledge.__wrapped__()
    assert kept == parsed  # entries, patterns (by their text) and toolchains
    copies = tuple(tmp_path / path.name for path in load.SHIPPED)
    for path, copy in zip(load.SHIPPED, copies, strict=True):
        shutil.copy(path, copy)
    assert load.load_knowledge.__wrapped__(copies) == parsed  # the same texts: the same key, read back
    mechanisms = copies[-1]
    mechanisms.write_text(mechanisms.read_text().replace('patterns = ["', 'patterns = ["(unclosed', 1))
    with pytest.raises(GpuDoctorError, match=r"mechanisms.toml: issue #1 .* is not a valid regex"):
        load.load_knowledge.__wrapped__(copies)
