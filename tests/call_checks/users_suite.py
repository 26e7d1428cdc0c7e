# A user's own test suite with gpudoctor's call checks on: tests/test_call_checks.py runs it as
# `GPUDOCTOR_CALL_CHECKS=raise python -m pytest tests/call_checks/users_suite.py`, where gpudoctor's pytest plugin
# checks every call of every CustomOpLibrary against what its op declares, raising before a call that does not match.
import shutil
import warnings
from pathlib import Path

import pytest
import torch

import gpudoctor.calls

try:
    from max.torch import CustomOpLibrary
except ModuleNotFoundError:  # MAX 26.2 and later moved the bridge
    from max.experimental.torch import CustomOpLibrary

OPS = Path(__file__).resolve().parent / "ops"
ops = CustomOpLibrary(OPS)
x, out = torch.ones(4, 4), torch.empty(4, 4)
notes: list[str] = []


def test_a_call_that_matches_runs() -> None:
    ops.plus_one(out, x)
    assert out.eq(2).all()


def test_a_call_that_does_not_match_raises_before_it_is_made() -> None:
    with pytest.raises(
        gpudoctor.calls.CallMismatch,
        match=r"plus_one \(.*ops/plus_one\.mojo:16\) declares `input` "
        r"float32 rank 2; the call at .*users_suite\.py:\d+ passes float64 \[4, 4\]",
    ):
        ops.plus_one(out, x.double())


def test_what_is_not_a_tensor_is_said_once_and_the_call_goes_on_as_without_gpudoctor() -> None:
    for _ in range(2):
        with warnings.catch_warnings(record=True) as said, pytest.raises(Exception) as raised:
            warnings.simplefilter("always")
            ops.plus_one(out, 1.5)
        assert not isinstance(raised.value, gpudoctor.calls.CallMismatch)  # torch's own error, as without the checks
        notes.extend(str(w.message) for w in said if w.category is gpudoctor.calls.CallNotCheckedWarning)
    assert len(notes) == 1 and "passes `input` as a float, not a tensor: not checked" in notes[0]


def test_check_warns_instead_of_raising_when_asked() -> None:
    gpudoctor.calls.check(ops, on_mismatch="warn")
    with pytest.warns(gpudoctor.calls.CallMismatchWarning, match="declares 2 tensors"), pytest.raises(RuntimeError):
        ops.plus_one(out)  # warned, then made: torch's own error follows


# Last: a second library from the same package registers the same torch ops (max::torch.plus_one) again, and the
# first library's ops called after it may crash in torch's dispatcher (SIGSEGV, std::bad_alloc; MAX 26.7, torch 2.13,
# without gpudoctor too: about 1 run in 4). Nothing calls `ops` after this test.
def test_a_library_made_from_a_compiled_package_is_said_unchecked_then_checked_with_its_source(
    tmp_path: Path,
) -> None:
    compiled = tmp_path / "ops.mojoc"
    shutil.copy(ops._kernel_library.library_paths()[0], compiled)  # MAX's own build of the folder
    library = CustomOpLibrary(compiled)
    with pytest.warns(gpudoctor.calls.CallNotCheckedWarning, match="ops.mojoc, which is compiled"), \
            pytest.raises(Exception) as raised:  # fmt: skip
        library.plus_one(out)  # no source: not checked, and torch says what is missing, as without the checks
    assert not isinstance(raised.value, gpudoctor.calls.CallMismatch)
    gpudoctor.calls.check(library, source=OPS)
    with pytest.raises(gpudoctor.calls.CallMismatch, match="declares 2 tensors"):
        library.plus_one(out)
