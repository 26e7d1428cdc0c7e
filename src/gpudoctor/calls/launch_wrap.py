"""Inside the program: Triton's ``JITFunction.run`` and CuPy's ``RawKernel`` / ``RawModule`` wrapped so that each
launch is checked before it proceeds (``calls.triton_launches``, ``calls.cupy_launches``), with the same settings,
side channel and sentences as the custom-op calls (``calls.wrap.Settings``). The launch itself is never changed, and
nothing the checks meet stops the program: what cannot be checked is said once. Neither Triton nor CuPy is imported
here: their modules are handed in, once the program has imported them (``calls.bridge``)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

from gpudoctor.calls.bridge import FRAMEWORKS, watch
from gpudoctor.calls.channel import Mode
from gpudoctor.calls.check import CallMismatch
from gpudoctor.calls.contract import shown
from gpudoctor.calls.cupy_launches import check_cupy_launch
from gpudoctor.calls.launch_mismatch import LaunchMismatch, caller, program_frame
from gpudoctor.calls.launches import _driver_knows, _own_maps
from gpudoctor.calls.signature import Signature, Unreadable, read_signature
from gpudoctor.calls.triton_launches import check_triton_launch, current_device, declared_at, wrap_jit_function
from gpudoctor.calls.wrap import Settings

_SIGNATURE = "_gpudoctor_calls_signature"  # on a kernel: its Signature, or None once said unreadable
_NAMES = "_gpudoctor_calls_names"  # on a JITFunction: its parameters' names
_CHECKED = "_gpudoctor_calls_checked"  # on a class made here
_SETTINGS: Settings | None = None


def _site(frame: FrameType | None) -> tuple[str, int]:
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)


@functools.cache
def _shown_site(site: tuple[str, int]) -> str:
    return f"{shown(site[0]) if site[0].startswith(os.sep) else site[0]}:{site[1]}"


def _say(settings: Settings, find: Callable[[str], LaunchMismatch | None], frame: FrameType | None,
         what: str) -> None:  # fmt: skip
    """Run one check with the program's line; a check that breaks says so once and the launch goes on."""
    site = _site(frame)
    try:
        mismatch = find(_shown_site(site))
    except Exception as error:
        settings.note(f"gpudoctor's check of {what} failed ({type(error).__name__}: {error})")
        return
    if mismatch is not None:  # (launches are no custom-op calls: no "checked" event, which speaks of those)
        settings.say(mismatch, site)


# --- Triton -------------------------------------------------------------------------------------------------------


def _parameter_names(kernel: Any) -> list[str]:
    names: list[str] | None = kernel.__dict__.get(_NAMES)
    if names is None:
        names = list(getattr(kernel, "arg_names", None) or ())
        if not names:  # a JITFunction of another shape: its Python function's own signature
            import inspect

            names = list(inspect.signature(kernel.fn).parameters)
        kernel.__dict__[_NAMES] = names
    return names


def _before_triton(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any], frame: FrameType | None) -> None:
    settings = _SETTINGS
    if settings is None:
        return
    name = str(getattr(kernel, "__name__", None) or "the kernel")

    def find(site: str) -> LaunchMismatch | None:
        return check_triton_launch(name, _parameter_names(kernel), args, kwargs, current_device(), site,
                                   declared_at(kernel), settings.note)  # fmt: skip

    _say(settings, find, frame, "Triton launches")


def _patch_triton(module: ModuleType) -> None:
    jit = sys.modules.get("triton.runtime.jit")
    jit_class = getattr(jit, "JITFunction", None)
    folder = os.path.dirname(os.path.abspath(module.__file__ or "."))
    wrapped = isinstance(jit_class, type) and wrap_jit_function(jit_class, _before_triton, folder)
    if not wrapped and _SETTINGS is not None:
        _SETTINGS.note("this Triton has no triton.runtime.jit.JITFunction.run: its launches are not checked")


# --- CuPy ---------------------------------------------------------------------------------------------------------


def _signature(kernel: Any, settings: Settings) -> Signature | None:
    """The kernel's signature, read once from its source; None (said once) when it cannot be read."""
    found: Signature | bool | None = kernel.__dict__.get(_SIGNATURE, False)
    if found is False:
        name = str(getattr(kernel, "name", "?"))
        code = getattr(kernel, "code", None)
        try:
            if getattr(kernel, "name_expressions", None):
                raise Unreadable(f"`{name}` comes from a RawModule with name_expressions (C++ templates or "
                                 "overloads, named as NVRTC lowers them)")  # fmt: skip
            if not isinstance(code, str):
                raise Unreadable(f"`{name}` was loaded from a compiled file (cubin, PTX), without its source")
            found = read_signature(code, name)
        except Unreadable as why:
            settings.note(f"CuPy kernel launches: {why}: its launches are not checked")
            found = None
        kernel.__dict__[_SIGNATURE] = found
    return found if isinstance(found, Signature) else None


def _before_cupy(kernel: Any, args: Any, frame: FrameType | None) -> None:
    settings = _SETTINGS
    if settings is None:
        return
    signature = _signature(kernel, settings)
    if signature is None:
        return

    def find(site: str) -> LaunchMismatch | None:
        at = f"line {signature.line} of its source"
        return check_cupy_launch(signature, tuple(args), site, at, _driver_knows, _own_maps)

    _say(settings, find, frame, "CuPy kernel launches")


def checked_kernel_class(raw_kernel: type, library_folder: str) -> type:
    """A subclass of CuPy's RawKernel (a Cython class, whose ``__call__`` cannot be replaced) whose launches are
    checked first."""
    folder = os.path.join(os.path.abspath(library_folder), "")

    class RawKernel(raw_kernel):  # type: ignore[misc]
        __doc__ = raw_kernel.__doc__

        def __call__(self, grid: Any, block: Any, args: Any, **kwargs: Any) -> Any:
            try:
                _before_cupy(self, args, program_frame(caller(1), folder))
            except CallMismatch:
                raise
            except Exception:
                pass
            return super().__call__(grid, block, args, **kwargs)

    RawKernel.__module__, RawKernel.__qualname__ = raw_kernel.__module__, raw_kernel.__qualname__
    setattr(RawKernel, _CHECKED, True)
    return RawKernel


def checked_module_class(raw_module: type, kernel_class: type) -> type:
    """A subclass of CuPy's RawModule whose ``get_function`` hands back a checked RawKernel of the same source, name
    and options (compiled once: CuPy caches the module by them); a module loaded from a file, or with
    name_expressions, hands back CuPy's own (said once)."""

    class RawModule(raw_module):  # type: ignore[misc]
        __doc__ = raw_module.__doc__

        def get_function(self, name: str) -> Any:
            kernel = super().get_function(name)
            code = getattr(self, "code", None)
            if not isinstance(code, str) or getattr(self, "name_expressions", None):
                if _SETTINGS is not None:
                    _signature(kernel, _SETTINGS)  # says why it cannot be checked
                return kernel
            try:
                return kernel_class(code, name, tuple(getattr(self, "options", ())),
                                    getattr(self, "backend", "nvrtc"),
                                    translate_cucomplex=bool(getattr(self, "translate_cucomplex", False)),
                                    enable_cooperative_groups=bool(getattr(self, "enable_cooperative_groups", False)),
                                    jitify=bool(getattr(self, "jitify", False)))  # fmt: skip
            except Exception:
                return kernel

    RawModule.__module__, RawModule.__qualname__ = raw_module.__module__, raw_module.__qualname__
    setattr(RawModule, _CHECKED, True)
    return RawModule


def _patch_cupy(module: ModuleType) -> None:
    raw_kernel, raw_module = getattr(module, "RawKernel", None), getattr(module, "RawModule", None)
    if not isinstance(raw_kernel, type) or getattr(raw_kernel, _CHECKED, False):
        return
    kernel_class = checked_kernel_class(raw_kernel, os.path.dirname(os.path.abspath(module.__file__ or ".")))
    module.RawKernel = kernel_class  # type: ignore[attr-defined]
    if isinstance(raw_module, type):
        module.RawModule = checked_module_class(raw_module, kernel_class)  # type: ignore[attr-defined]


# --- switching on -------------------------------------------------------------------------------------------------


def _patch(module: ModuleType) -> None:
    if module.__name__ == "triton":
        _patch_triton(module)
    elif module.__name__ == "cupy":
        _patch_cupy(module)


def install_launches(module: ModuleType | None = None, mode: Mode | None = None) -> None:
    """Check every Triton and CuPy RawKernel launch of this process from now on, as ``mode`` says (default: the
    GPUDOCTOR_CALL_CHECKS environment variable; "raise" raises CallMismatch instead of a launch that does not match,
    "warn" warns CallMismatchWarning, "record" only writes the side channel): ``module`` (``triton`` or ``cupy``)
    now; without it, each now if imported, else once the program imports it."""
    global _SETTINGS
    mode = mode if mode is not None else Mode.from_environment(os.environ)
    if mode is Mode.OFF:
        return
    if _SETTINGS is None or _SETTINGS.mode is not mode:
        _SETTINGS = Settings.of(mode)
    if module is not None:
        _patch(module)
        return
    for name, attribute in FRAMEWORKS:
        watch(_patch, (name,), attribute)
