"""Triton launches checked before they proceed: every tensor argument on the device the kernel launches on. Triton
launches on the current CUDA device (``driver.active.get_current_device()``, torch's current device) and hands each
tensor's ``data_ptr()`` to the driver; a tensor on another GPU or on the CPU ends in its launcher's "Pointer argument
(at N) cannot be accessed from Triton (cpu tensor?)" — which blames the CPU for a tensor on another GPU too — or, with
peer access on, in a kernel reading another GPU's memory. The check names the parameter, from the kernel's own
signature (``JITFunction.arg_names``), and both devices.

The hook point is ``JITFunction.run(self, *args, grid, warmup, **kwargs)`` (Triton 2.x and 3.x,
``triton/runtime/jit.py``): ``kernel[grid](...)`` is ``KernelInterface.__getitem__``'s proxy calling it, and the
autotuner and heuristics wrappers call it too. Duck-typed: a tensor is anything with ``data_ptr`` and ``device``;
neither torch nor Triton is imported here."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gpudoctor.calls.check import Kind
from gpudoctor.calls.launch_mismatch import LaunchKind, LaunchMismatch, caller, program_frame

_PATCHED = "_gpudoctor_calls_patched"
_SUBCLASSES: dict[type, str | None] = {}  # a class: its name when it subclasses torch.Tensor
_PLAIN_TENSORS = ("Tensor", "Parameter", "Buffer")  # torch's own classes: any other Tensor class is a subclass
Before = Callable[[Any, tuple[Any, ...], dict[str, Any], Any], None]  # kernel, args, kwargs, the program's frame


def tensor_subclass(value: Any) -> str | None:
    """The name of ``value``'s class when it is a subclass of torch.Tensor (its device may not be where its data is:
    a wrapper, a DTensor, a fake tensor), else None. Read from the class's MRO: torch is not imported."""
    cls = type(value)
    if cls not in _SUBCLASSES:
        _SUBCLASSES[cls] = _subclass_name(cls)
    return _SUBCLASSES[cls]


def _subclass_name(cls: type) -> str | None:
    if cls.__name__ in _PLAIN_TENSORS and cls.__module__.startswith("torch"):
        return None
    bases = cls.__mro__[1:]
    return cls.__qualname__ if any(c.__name__ == "Tensor" and c.__module__ == "torch" for c in bases) else None


def _device(value: Any) -> str | None:
    """A tensor argument's device ("cuda:0", "cpu"); None when it is no tensor."""
    if not hasattr(value, "data_ptr"):
        return None
    device = getattr(value, "device", None)
    return None if device is None else str(device)


def bind(names: Sequence[str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The arguments by their parameter's name, in the signature's order (launch options such as num_warps, which
    are no parameter, left out)."""
    bound = list(zip(names, args, strict=False))
    bound += [(name, kwargs[name]) for name in names[len(args) :] if name in kwargs]
    return bound


def check_triton_launch(
    kernel: str, names: Sequence[str], args: tuple[Any, ...], kwargs: dict[str, Any], launch_device: str | None,
    site: str, declared_at: str = "Triton kernel", note: Callable[[str], None] | None = None,
) -> LaunchMismatch | None:  # fmt: skip
    """The first tensor argument of a launch of ``kernel`` (parameters ``names``) that is not on the launch's device
    (``launch_device``, "cuda:0"; None: the first tensor's). ``note`` hears once what is not checked."""
    tensors: list[tuple[str, str]] = []
    for name, value in bind(names, args, kwargs):
        device = _device(value)
        if device is None:
            continue
        subclass = tensor_subclass(value)
        if subclass is not None:
            if note is not None:
                note(f"`{name}` of `{kernel}` is a {subclass} (a tensor subclass): its device is not checked")
            continue
        tensors.append((name, device))
    if not tensors:
        return None
    here = launch_device or next((d for _, d in tensors if d != "cpu"), None)
    away = next(((n, d) for n, d in tensors if d != here), None)
    if here is None or away is None:
        return None
    on_launch = next((n for n, d in tensors if d == here), None)
    name, device = away
    where = f"the launch of `{kernel}` at {site}"
    said = "Triton's own message for it says 'cannot be accessed from Triton (cpu tensor?)'"
    if device == "cpu":
        beside = f"`{on_launch}` on {here} and " if on_launch else ""
        sentence = (f"{where} passes {beside}`{name}` on cpu: a Triton kernel reads every tensor from the GPU it "
                    f"runs on ({here}) ({said}); move the tensor passed as `{name}` there: "
                    f"`.to(\"{here}\")`")  # fmt: skip
        given = f"{beside}`{name}` on cpu"
    elif on_launch is None:
        # every tensor on one other GPU than the current device: on two H200s (Triton 3.6, 2026-11-27,
        # tests/fixtures/h200x2-launches) such a launch ran and returned without an error, so it is no mismatch to
        # name (whether its result is right there was not checked)
        return None
    else:
        sentence = (f"{where} passes `{on_launch}` on {here} and `{name}` on {device}: Triton launches on one "
                    f"device ({here}, the current one) and every tensor must be on it; {said}, although no tensor "
                    f"is on the CPU; move the tensor passed as `{name}` to {here}: `.to(\"{here}\")`")  # fmt: skip
        given = f"`{on_launch}` on {here} and `{name}` on {device}"
    return LaunchMismatch(Kind.DEVICES, kernel, declared_at, name, f"every tensor on {here}", given, site, sentence,
                          LaunchKind.TRITON_DEVICES)  # fmt: skip


def current_device() -> str | None:
    """The device Triton launches on now ("cuda:1"), as its driver says; None when it cannot say."""
    driver = getattr(sys.modules.get("triton.runtime.driver"), "driver", None)
    try:
        index = driver.active.get_current_device() if driver is not None else None
    except Exception:
        return None
    return f"cuda:{index}" if isinstance(index, int) else None


def declared_at(kernel: Any) -> str:
    """Where a JITFunction's Python function is defined: prog.py:12."""
    code = getattr(getattr(kernel, "fn", None), "__code__", None)
    if code is None:
        return "Triton kernel"
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"


def wrap_jit_function(jit_class: type, before: Before, library_folder: str) -> bool:
    """``jit_class.run`` calling ``before(kernel, args, kwargs, frame)`` first, for launches (not warm-ups), with the
    program's frame (the first outside ``library_folder``, Triton's package); False when the class has no run."""
    run: Callable[..., Any] | None = vars(jit_class).get("run")
    if run is None or getattr(run, _PATCHED, False):
        return run is not None
    folder = os.path.join(os.path.abspath(library_folder), "")

    @functools.wraps(run)
    def checked_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("warmup", False):
            before(self, args, kwargs, program_frame(caller(1), folder))
        return run(self, *args, **kwargs)

    setattr(checked_run, _PATCHED, True)
    setattr(jit_class, "run", checked_run)  # noqa: B010 (mypy refuses assigning a method)
    return True
