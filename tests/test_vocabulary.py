"""The vocabulary the generic answer reads a failure's text with (src/gpudoctor/knowledge/vocabulary.toml): every entry
against the public text it came from (a report of the field corpora, quoted there with its thread, or the thread
itself); a text naming two components attributed to the one that raised; the loader's refusals; and, over every
report of every corpus, no answer that names no component where a mark is in the text, none that proposes
`gpudoctor run` in a report of a run, and no bisect over more than a few releases without a sign of a release change."""

from __future__ import annotations

import dataclasses
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, TESTS
from test_field_corpus import H100

from gpudoctor.errors import GpuDoctorError
from gpudoctor.knowledge import match_findings
from gpudoctor.knowledge.answer import GENERIC_ID, UNNAMED, answer
from gpudoctor.knowledge.load import load_knowledge
from gpudoctor.knowledge.reading import frames, read
from gpudoctor.knowledge.vocabulary import VOCABULARY, load_vocabulary
from gpudoctor.model import Device, Outcome, ProbeResult, Report
from gpudoctor.protocol import LOG_RUN_ID, REPRODUCER_RUN_ID

sys.path.insert(0, str(ROOT / "scripts"))
from generic_answer import wide_bisects  # the measuring script's own check

RAW = tomllib.loads(VOCABULARY.read_text())
VOCABULARY_READ = load_vocabulary()
KNOWLEDGE = load_knowledge()
CORPUS_FILES = (
    "corpus.toml",
    "heldout.toml",
    "heldout2.toml",
    "heldout3.toml",
    "heldout4.toml",
    "heldout5.toml",
    "heldout6.toml",
    "heldout7.toml",
    "heldout8.toml",
    "heldout9.toml",
    "heldout10.toml",
    "heldout11.toml",
    "heldout12.toml",
    "heldout13.toml",
    "heldout14.toml",
    "heldout15.toml",
    "heldout16.toml",
    "heldout17.toml",
    "heldout18.toml",
    "heldout19.toml",
    "heldout20.toml",
    "faults.toml",
)
QUOTES = {f"{name}#{r['id']}": r for name in CORPUS_FILES
          for r in tomllib.loads((TESTS / "field_corpus" / name).read_text())["report"]}  # fmt: skip
SECTIONS = ("mark", "word", "kind", "vendor")
ENTRIES = [(section, n, entry) for section in SECTIONS for n, entry in enumerate(RAW[section])]


def _entry_id(section: str, n: int, entry: dict[str, Any]) -> str:
    return f"{section}-{n + 1}-{entry.get('component') or entry.get('phase') or entry.get('id')}"


@pytest.mark.parametrize(("section", "n", "entry"), ENTRIES, ids=[_entry_id(*e) for e in ENTRIES])
def test_each_entry_matches_the_public_text_it_came_from(section: str, n: int, entry: dict[str, Any]) -> None:
    source, text = entry["source"], entry["text"]
    if source.startswith("https://"):
        assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+", source)
    else:
        report = QUOTES[source]  # a report of the corpora, with its thread
        assert report["url"].startswith("https://") and text in report["quote"], (source, text)
    if "pattern" in entry:
        assert re.search(entry["pattern"], text), (entry["pattern"], text)


def _as_frame(text: str) -> str:
    return f'  File "{text}", line 1, in f\n' if not text.lstrip().startswith("File") else text


MARKS = list(enumerate(RAW["mark"]))
WORDS = list(enumerate(RAW["word"]))


@pytest.mark.parametrize(("n", "mark"), MARKS, ids=[f"mark-{n + 1}-{m['component']}" for n, m in MARKS])
def test_each_mark_alone_names_its_component_or_what_its_code_means(n: int, mark: dict[str, Any]) -> None:
    """A mark's own text read alone: a layer's status, a tool's line, a frame, an exception or a name names its
    component; a status that blames the caller says the phase and the kind of failure it means."""
    text = _as_frame(mark["text"]) if mark["kind"] == "frame" else mark["text"]
    reading = read(text, VOCABULARY_READ)
    if mark.get("blames") == "caller":
        assert mark.get("phase") in (None, reading.phase), (text, reading)
        assert mark.get("means") in (None, getattr(reading.kind, "id", None)), (text, reading)
    else:
        assert reading.component is not None and reading.component.id == mark["component"], (text, reading)


@pytest.mark.parametrize(("n", "word"), WORDS, ids=[f"word-{n + 1}" for n, _ in WORDS])
def test_each_word_alone_shows_its_phase(n: int, word: dict[str, Any]) -> None:
    phase = read(word["text"], VOCABULARY_READ).phase
    assert phase == word["phase"] or (word["phase"] == "compile" and phase in ("build", "jit-compile")), word


def _log(text: str, outcome: Outcome = Outcome.FAIL, run_id: str = LOG_RUN_ID) -> ProbeResult:
    return ProbeResult(id=run_id, probe=run_id, device=Device.NONE, outcome=outcome, duration_s=1.0,
                       stderr_tail=text, command="python prog.py")  # fmt: skip


EMPTY = dataclasses.replace(H100.environment, packages={})


def _answer(text: str, run_id: str = LOG_RUN_ID) -> Any:
    return answer(_log(text, run_id=run_id), text, EMPTY, KNOWLEDGE)


TWO_COMPONENTS = [
    # torch's frames around, Triton's innermost: Triton raised (triton-lang/triton#2290's shape)
    (
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.12/site-packages/torch/_tensor.py", line 5, in f\n'
        '  File "/venv/lib/python3.12/site-packages/triton/runtime/jit.py", line 9, in run\n'
        "AssertionError: bad\n",
        "triton",
        None,
    ),
    # numba's frames called cuInit, whose status says the driver failed (heldout3 numba-cuinit-operating-system-304)
    (QUOTES["heldout3.toml#numba-cuinit-operating-system-304"]["quote"], "cuda-driver", "numba-cuda"),
    # Triton built its launcher with MSVC, whose own error line raised (heldout3 triton-windows-launcher-c2059)
    (QUOTES["heldout3.toml#triton-windows-launcher-c2059-msvc-mix"]["quote"], "host-compiler", "Triton"),
    # nvcc's errors under cpp_extension's frames are that build's (heldout3 extension-cpp-py-limited-api-py-buffer)
    (QUOTES["heldout3.toml#extension-cpp-py-limited-api-py-buffer"]["quote"], "cpp-extension", None),
    # two messages: "Triton compilation error:" and, last, Inductor's undefined size symbol (heldout3 blt-inductor)
    (QUOTES["heldout3.toml#blt-inductor-triton-nameerror-s10"]["quote"], "torch-inductor", None),
    # torch's frames and THC's status 30 at CUDA's initialisation: the runtime (heldout3 torch-thccudacheck-error-30)
    (QUOTES["heldout3.toml#torch-thccudacheck-error-30-model-cuda"]["quote"], "cuda-runtime", "PyTorch"),
]


@pytest.mark.parametrize(("text", "raised", "called_from"), TWO_COMPONENTS, ids=[t[1] for t in TWO_COMPONENTS])
def test_a_text_naming_two_components_is_attributed_to_the_one_that_raised(
    text: str, raised: str, called_from: str | None
) -> None:
    said = _answer(text)
    assert said.component_id == raised, said
    assert called_from is None or (said.caller or "").startswith(called_from), said


def test_the_phases_gpudoctor_lacked_and_what_each_kind_means() -> None:
    said = _answer(QUOTES["heldout3.toml#cupy-cuda92-no-matching-distribution"]["quote"])
    assert (said.component_id, said.phase) == ("pip", "install") and "pip download cupy-cuda92" in said.experiment
    said = _answer(QUOTES["heldout3.toml#bi-mamba2-triton-compilationerror"]["quote"])
    assert said.phase == "jit-compile" and "rejected the kernel's source" in said.means
    said = _answer("[BUG]: mojo crash: Assertion `detail::isPresent(Val)' failed.")
    assert said.phase == "jit-compile" and "a bug of that compiler on this code" in said.means
    said = _answer(
        "g++: fatal error: Killed signal terminated program cc1plus\nninja: build stopped: subcommand failed"
    )
    assert said.phase == "build" and "out of memory" in said.means and "MAX_JOBS=2" in said.experiment
    said = _answer("Exception ignored in: <function CompilationUnit.__del__ at 0x7ff32b2950d0>\nAttributeError: x\n")
    assert said.phase == "exit" and "usually harmless" in said.means
    hung = answer(_log("", Outcome.TIMEOUT), "", EMPTY, KNOWLEDGE)
    assert hung.phase.startswith("hang")


def test_a_compilers_bug_proposes_its_neighbouring_releases_only() -> None:
    text = "python: /root/.triton/llvm/include/llvm/ADT/SmallVector.h:298: Assertion `idx < size()' failed.\n" + (
        '  File "/venv/lib/python3.12/site-packages/triton/compiler/compiler.py", line 3, in compile\n'
    )
    # the release the log itself gives (issue 51: the reporter's, never this machine's)
    given = "[pip3] triton==3.6.0\n" + text
    said = answer(_log(given), given, H100.environment, KNOWLEDGE)
    assert "gpudoctor bisect --package triton 3.4..3.6.0 -- your command" in said.experiment
    assert said.requirements == "triton 3.6.0 as the log gives it"
    # this machine's Triton is not the log's: nothing to count back from, where to read the releases
    installed = dataclasses.replace(H100.environment, packages={**H100.environment.packages, "triton": "3.6.0"})
    said = answer(_log(text), text, installed, KNOWLEDGE)
    assert "pip index versions triton" in said.experiment and "bisect" not in said.experiment
    assert said.requirements == "the log gives no release of it"
    # a report of `gpudoctor run` is this machine's: its installed release counts
    said = answer(_log(text, run_id=REPRODUCER_RUN_ID), text, installed, KNOWLEDGE)
    assert "gpudoctor bisect --package triton 3.4..3.6.0" in said.experiment


def test_a_report_of_a_run_never_proposes_running_it_again() -> None:
    cut = 'Traceback (most recent call last):\n  File "/home/u/prog.py", line 3, in <module>\n    main()'
    for text in (cut, "Fatal Python error: Segmentation fault", "CUDA error: an illegal memory access was encountered"):
        assert "gpudoctor run" in _answer(text).experiment  # from a log: the run is the next experiment
        assert "gpudoctor run" not in _answer(text, REPRODUCER_RUN_ID).experiment


def test_the_loader_refuses_what_types_cannot_say(tmp_path: Path) -> None:
    text = VOCABULARY.read_text()
    broken = {
        "unknown component": text.replace(
            'component = "triton"\nkind = "frame"', 'component = "tritn"\nkind = "frame"'
        ),
        "a regex": text.replace("pattern = '__triton_launcher\\.c'", "pattern = '__triton_launcher(.c'"),
        "a circle": text.replace('experiment_in_run = "the one call that fails', 'experiment_in_rn = "x'),
        "a source": text.replace('source = "heldout3.toml#zluda-triton-hip-209-gfx1201"', 'source = "a forum"'),
    }
    for what, changed in broken.items():
        assert changed != text, what
        path = tmp_path / f"{what.replace(' ', '-')}.toml"
        path.write_text(changed)
        with pytest.raises(GpuDoctorError) as error:
            load_vocabulary(path)
        assert str(error.value).count("\n") == 0 and str(path) in str(error.value), what


CORPORA = list(QUOTES.items())


def _with(run_id: str, quote: str, environment: Any) -> Report:
    return Report(doctor_version="0", created="", environment=environment, results=(_log(quote, run_id=run_id),))


def _proposals(finding: Any) -> str:
    """What a finding proposes to do: its fix, and the `next:` of each generic answer."""
    nexts = [line.split("next: ", 1)[1] for line in finding.evidence if "next: " in line]
    return " ".join([finding.fix, *nexts])


@pytest.mark.parametrize(("key", "report"), CORPORA, ids=[k for k, _ in CORPORA])
def test_every_corpus_report_answered_without_a_circle_or_a_wide_bisect(key: str, report: dict[str, Any]) -> None:
    quote = report["quote"]
    said = _answer(quote)
    # a component's own name ("named") is read only in the lines that say what failed, where no own frame raised it
    marked = any(m.kind not in ("frame", "named") and m.pattern.search(quote) for m in VOCABULARY_READ.marks) or any(
        m.kind == "frame" and m.pattern.search(f.path) for f in frames(quote) for m in VOCABULARY_READ.marks
    )
    assert not (marked and said.component == UNNAMED), said
    findings = match_findings(_with(REPRODUCER_RUN_ID, quote, H100.environment))
    assert {f.id for f in findings}, key
    for finding in findings:
        assert "gpudoctor run" not in _proposals(finding), (finding.id, _proposals(finding))
    for environment in (H100.environment, EMPTY):
        for finding in match_findings(_with(LOG_RUN_ID, quote, environment)):
            if finding.id == GENERIC_ID:
                text = " ".join(finding.evidence)
                assert not wide_bisects(text) or "declares" in text, text
