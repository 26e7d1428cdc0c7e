"""Issue 51: the corpus of resolved public reports (src/gpudoctor/knowledge/public_reports) and its matcher. The
corpus is data others can check: every entry with its address and its fields, none of the threads kept for
evaluation; a failure's error lines find the reports of the same error, and only those."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from conftest import ROOT, run_cli

from gpudoctor.knowledge.public import FOLDER, error_lines, load_corpus, signature
from gpudoctor.report.codec import decode

STACKS = {"torch", "torch-compile", "cpp-extension", "triton", "cupy", "numba-cuda", "cuda-python", "max-mojo",
          "driver-container", "nccl-distributed", "dlpack", "other"}  # fmt: skip
RESOLVED = {"fixed", "workaround", "explained", "open"}
_THREAD = re.compile(r"[\w.-]+/[\w.-]+#\d+")


def _entries() -> list[dict[str, object]]:
    return [item for path in sorted(FOLDER.glob("*.toml")) for item in tomllib.loads(path.read_text())["report"]]


def _threads(text: str) -> set[str]:
    return {m.lower() for m in _THREAD.findall(text)}


def test_every_entry_is_a_thread_with_its_error_cause_and_fix() -> None:
    entries = _entries()
    assert len(entries) >= 300
    for entry in entries:
        where = entry.get("source")
        assert isinstance(where, str) and (_THREAD.fullmatch(where) or where.startswith("forum:")), where
        assert str(entry["url"]).startswith("https://"), where
        assert entry["stack"] in STACKS and entry["resolved"] in RESOLVED, where
        assert str(entry["error"]).strip() and str(entry["cause"]).strip() and str(entry["fix"]).strip(), where


def test_no_thread_kept_for_evaluation_is_in_the_corpus() -> None:
    reserved = _threads((ROOT.parent / "shared" / "reserved-threads.txt").read_text())
    # the evaluation sets' own reports (their `source`), not the threads a judgement file quotes an answer citing
    sets = [
        p for p in (ROOT / "tests" / "field_corpus").glob("*.toml") if "-blind" not in p.stem and "-after" not in p.stem
    ]
    evaluation = {
        str(r.get("source", "")).lower() for p in sets for r in tomllib.loads(p.read_text()).get("report", [])
    }
    evaluation |= _threads((ROOT.parent / "shared" / "FIELD-REPORTS.md").read_text())
    corpus = {str(e["source"]).lower() for e in _entries()}
    assert corpus & reserved == set()
    assert corpus & evaluation == set()  # the held-out sets measure the matcher blind


def test_a_signature_leaves_out_what_varies_between_two_reports_of_one_error() -> None:
    one = signature(["ImportError: /home/a/env/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-"
                     "linux-gnu.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocation at 0x7f3a9c"])  # fmt: skip
    two = signature(["ImportError: /opt/conda/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-"
                     "linux-gnu.so: undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocation at 0x55e1"])  # fmt: skip
    assert "home" not in one and "conda" not in two and not any(w.startswith("0x") for w in one)
    assert set(one) - {"cpython"} == set(two) - {"cpython"}
    assert error_lines("pip install ok\nCollecting torch\nRuntimeError: CUDA error: invalid argument\n") == [
        "RuntimeError: CUDA error: invalid argument"]  # fmt: skip


def test_the_same_error_finds_the_reports_that_solved_it_and_a_foreign_one_finds_none(tmp_path: Path) -> None:
    log = tmp_path / "import.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                   "    import flash_attn\n"
                   "ImportError: /venv/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
                   "undefined symbol: _ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcE"
                   "SaIcEEE\n")  # fmt: skip
    report = decode(json.loads(run_cli("explain", "--json", str(log), timeout=120).stdout))
    public = next(f for f in report.findings if f.id == "same-error-in-public-reports")
    assert public.part_of == "extension-built-for-another-torch"  # a known mechanism leads; what others found backs it
    threads = [line for line in public.evidence[1:]]
    assert threads and all("the cause was" in line and "https://github.com/" in line for line in threads)
    assert all("flash-attention" in line or "flash" in line.lower() for line in threads[:2])
    # words of another world share no rare word with the corpus: nothing is claimed
    assert load_corpus().nearest(["ZeroDivisionError: the quokka ledger overflowed its marmalade budget"]) == []


def test_a_tracebacks_code_lines_and_a_builds_wrapper_lines_are_not_the_error() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/x/numba/cuda/cudadrv/driver.py", line 330, in _check_ctypes_error\n'
        "    raise CudaAPIError(retcode, msg)\n"
        "numba.cuda.cudadrv.driver.CudaAPIError: [700] Call to cuLaunchKernel results in UNKNOWN_CUDA_ERROR\n"
        "ninja: build stopped: subcommand failed.\n"
        "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.\n"
    )
    assert error_lines(text) == [
        "numba.cuda.cudadrv.driver.CudaAPIError: [700] Call to cuLaunchKernel results in UNKNOWN_CUDA_ERROR"
    ]
    # a code line whose frame line was cut off is code all the same
    assert error_lines("    raise CudaAPIError(retcode, msg)\n    err = RuntimeError(msg)\n") == []


def test_a_failure_quoted_in_prose_or_a_title_alone_is_still_the_error() -> None:
    # between backticks or after a bracketed tag (a title), in a failure's words without "error", or a tool's one line
    assert error_lines("`RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB`") == [
        "`RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB`"]  # fmt: skip
    assert error_lines("[kernels]ValueError: bad block size") == ["[kernels]ValueError: bad block size"]
    assert error_lines("I ran it on the cluster\nTorch not compiled with CUDA enabled\n") == [
        "Torch not compiled with CUDA enabled"]  # fmt: skip
    assert error_lines("Tried the nightly build too.\npynvml.nvml.NVMLError_Uninitialized on 2021.6.1") == [
        "pynvml.nvml.NVMLError_Uninitialized on 2021.6.1"]  # fmt: skip
    # a Cython frame shows no code line: the exception under it is the error
    assert error_lines('  File "cupy/cuda/device.pyx", line 1, in init cupy.cuda.device\n'
                       "ImportError: libcudart.so.11.0: cannot open shared object file\n") == [
        "ImportError: libcudart.so.11.0: cannot open shared object file"]  # fmt: skip
    # nothing in a failure's words: the text's last lines stand for it (a title pasted alone)
    assert error_lines("GPU kernel launch on the second card\n") == ["GPU kernel launch on the second card"]


def test_two_errors_of_one_shape_naming_different_things_are_not_the_same_error(tmp_path: Path) -> None:
    corpus_folder = tmp_path / "reports"
    corpus_folder.mkdir()
    entries = [
        ("a/triton-win#1", "ModuleNotFoundError: No module named 'triton'", "no Windows wheel of the package"),
        ("b/cupy-env#2", "ModuleNotFoundError: No module named 'cupy'", "installed into another interpreter"),
        ("c/nvcc-old#3", "nvcc fatal   : Unsupported gpu architecture 'compute_86'", "an nvcc older than the GPU"),
    ] + [(f"d/filler#{n}", f"ValueError: unrelated filler message number {n} about widget{n}", "filler")
         for n in range(12)]  # fmt: skip
    text = "".join(
        f'[[report]]\nsource = {json.dumps(s)}\nurl = "https://github.com/{s.replace("#", "/issues/")}"\n'
        f'date = "2025-01-01"\nstack = "other"\nerror = {json.dumps(e)}\ncause = {json.dumps(c)}\n'
        f'fix = "the fix"\nresolved = "fixed"\n\n'
        for s, e, c in entries
    )
    (corpus_folder / "made_up.toml").write_text(text)
    corpus = load_corpus(corpus_folder)
    found = [r.source for _, r in corpus.nearest(["ModuleNotFoundError: No module named 'cupy'"])]
    assert found == ["b/cupy-env#2"]  # the same words, another module: another error
    # numbers aside, one error's two arguments are the same error
    found = [r.source for _, r in corpus.nearest(["nvcc fatal   : Unsupported gpu architecture 'compute_35'"])]
    assert found == ["c/nvcc-old#3"]
