"""Right about correct code (issue 43): an element counts as unwritten only when it keeps each of two calls' own
marker, for every dtype the kernel probe supports — so a correct op whose right value is a marker (a black pixel in
uint8, an integer's smallest value, False, NaN) is never called broken, and an op that leaves outputs unwritten is
still caught. The judge runs on real torch tensors through real ops written in Python that behave as a GPU run does
(the caller's buffer is what the op writes into); the Mojo fixtures of the same shapes run under `gpudoctor kernel`
in tests/test_kernel_verdicts.py."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch
from conftest import ROOT

sys.path.insert(0, str(ROOT / "probes"))
import _outputs  # the probes' module (run in the examined interpreter)

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16, torch.int32,
          torch.int64, torch.uint8, torch.bool]  # fmt: skip


def _caller(op: Callable[[torch.Tensor, torch.Tensor], None], dtype: torch.dtype) -> Callable[..., list[Any]]:
    """``call(inputs, start, before)`` as probes/kernel.py's call_op makes it, for an op on the caller's buffer."""

    def call(inputs: list[torch.Tensor], start: str, before: list[torch.Tensor] | None) -> list[torch.Tensor]:
        output = torch.empty((8, 8), dtype=dtype)
        if start == "before":
            assert before is not None
            output.copy_(before[0])
        elif start in _outputs.MARKERS:
            output.fill_(_outputs.fill_value(torch, dtype, _outputs.MARKERS[start]))
        else:
            output.zero_()
        op(output, *inputs)
        return [output.clone()]

    return call


def _judge(op: Callable[[torch.Tensor, torch.Tensor], None], dtype: torch.dtype, input_dtype: torch.dtype) -> Any:
    inputs = [torch.arange(64).reshape(8, 8).to(input_dtype)]
    call = _caller(op, dtype)
    first = call(inputs, "marker", None)
    evidence = _outputs.gather(torch, call, inputs, first)
    return _outputs.judge(torch, evidence, lambda i, t: f"output {i}", False, "cuda", True)


def _markers_as_results(output: torch.Tensor, x: torch.Tensor) -> None:
    """A correct op whose right results are the dtype's markers: the first where the input is even (counting in
    eighths, so a float input's other values change it), the second where it is odd."""
    first, second = (torch.full_like(output, _outputs.fill_value(torch, output.dtype, n)) for n in (0, 1))
    steps = (x.double() * 8).round().long() if x.dtype.is_floating_point else x.long()
    even = steps % 2 == 0
    output.copy_(torch.where(even, first, second))


def _half_unwritten(output: torch.Tensor, x: torch.Tensor) -> None:
    """Writes the first four rows only (a grid of half the rows)."""
    output[:4] = (x[:4] % 2 == 1) if output.dtype == torch.bool else (x[:4] + 1).to(output.dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_an_op_that_computes_the_markers_is_not_called_unwritten(dtype: torch.dtype) -> None:
    for input_dtype in (torch.float32, torch.int32):
        assert _judge(_markers_as_results, dtype, input_dtype) is None


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_an_op_that_leaves_part_of_its_output_unwritten_is_caught(dtype: torch.dtype) -> None:
    verdict = _judge(_half_unwritten, dtype, torch.int32)
    assert verdict is not None and verdict.detail == "output_unwritten"
    assert "32 of 64 elements were not written" in verdict.sentence


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_an_op_that_never_writes_is_caught(dtype: torch.dtype) -> None:
    verdict = _judge(lambda output, x: None, dtype, torch.int32)
    assert verdict is not None and verdict.detail == "output_unwritten"
    assert "was never written" in verdict.sentence


def test_a_black_pixel_is_a_result() -> None:
    """The grayscale shape: uint8 in, uint8 out, some pixels 0 (the uint8 first marker) — no finding."""

    def gray(output: torch.Tensor, image: torch.Tensor) -> None:
        value = 0.21 * image[..., 0].float() + 0.71 * image[..., 1].float() + 0.07 * image[..., 2].float()
        output.copy_(value.clamp(max=255).to(torch.uint8))

    image = torch.zeros(8, 8, 3, dtype=torch.uint8)
    image[4:] = 200
    call = _caller(gray, torch.uint8)
    evidence = _outputs.gather(torch, call, [image], call([image], "marker", None))
    assert _outputs.judge(torch, evidence, lambda i, t: "img_out", False, "cuda", True) is None


def test_the_two_markers_differ_for_every_dtype() -> None:
    for dtype in DTYPES:
        first, second = (_outputs.fill_value(torch, dtype, n) for n in (0, 1))
        assert first is not second and first != second, dtype
