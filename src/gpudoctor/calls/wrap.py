"""Inside the program: MAX's ``CustomOp.__call__`` wrapped so that each call of an op of a checked library is checked
against the op's contract before it proceeds (``calls.check``), and ``CustomOpLibrary.__init__`` wrapped to remember
the source a library was made from. What a check finds goes to the side channel (``calls.channel``: the first mismatch
of each line of the program, durably) and, as the mode says, becomes a warning or an exception; the call itself is
never changed, and nothing the checks meet stops the program. Torch and MAX are never imported here: the bridge
module is handed in."""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from gpudoctor.calls.bridge import LAUNCHERS, watch
from gpudoctor.calls.callsite import argument_source
from gpudoctor.calls.channel import EVENT_CHECKED, EVENT_MISMATCH, EVENT_UNCHECKED, FILE_ENV, Channel, Mode
from gpudoctor.calls.check import (
    ArgumentText,
    CallMismatch,
    CallMismatchWarning,
    CallNotCheckedWarning,
    Mismatch,
    explain_call,
    parameter_mismatch,
)
from gpudoctor.calls.contract import COMPILED_SUFFIXES, Contract, LibraryContracts, built_from, read_contracts, shown
from gpudoctor.calls.graph_calls import wrap_graph_building
from gpudoctor.calls.graph_values import graph_tensor
from gpudoctor.calls.launches import check_launch, wrap_launch
from gpudoctor.calls.quick import Plan, matches

_SOURCE = "_gpudoctor_calls_source"  # on a library: the path it was made from
_SETTINGS = "_gpudoctor_calls_settings"  # on a library: its own settings (gpudoctor.calls.check)
_CONTRACTS = "_gpudoctor_calls_contracts"  # on a library: its ops' contracts, once read
_STATE = "_gpudoctor_calls_state"  # on an op: how its calls are checked
_PATCHED = "_gpudoctor_calls_patched"  # on a class: wrapped already


def _site_of(frame: FrameType | None) -> tuple[str, int]:
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("<unknown>", 0)


@functools.cache
def _shown_site(site: tuple[str, int]) -> str:
    return f"{shown(site[0]) if site[0].startswith(os.sep) else site[0]}:{site[1]}"


@dataclass
class Settings:
    """How a mismatch is said (the mode) and where events go; what has been said once in this process."""

    mode: Mode
    channel: Channel | None = None
    checked: set[tuple[str, str, int]] = field(default_factory=set)  # (op, file, line): a line may call several
    mismatched: set[tuple[str, str, int]] = field(default_factory=set)
    noted: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, mode: Mode, env: Mapping[str, str] = os.environ) -> Settings:
        path = env.get(FILE_ENV)
        return cls(mode, Channel(path) if path else None)

    def note(self, what: str) -> None:
        """Say once what could not be checked."""
        if what in self.noted:
            return
        self.noted.add(what)
        if self.channel is not None:
            self.channel.write({"event": EVENT_UNCHECKED, "what": what})
        if self.mode in (Mode.WARN, Mode.RAISE):
            warnings.warn(what, CallNotCheckedWarning, stacklevel=4)

    def checked_at(self, op: str, site: tuple[str, int]) -> None:
        """The first call of an op at a line of the program (a loop may call several ops at one line), checked."""
        if (op, *site) not in self.checked:
            self.checked.add((op, *site))
            if self.channel is not None:
                self.channel.write({"event": EVENT_CHECKED, "op": op, "site": _shown_site(site)})

    def say(self, mismatch: Mismatch, site: tuple[str, int]) -> None:
        """A call that does not match: to the side channel, durably, and as a warning, once per op and line; raised
        each time in RAISE mode."""
        if (mismatch.op, *site) not in self.mismatched:
            self.mismatched.add((mismatch.op, *site))
            if self.channel is not None:
                self.channel.write({"event": EVENT_MISMATCH, **mismatch.to_event()}, durable=True)
            if self.mode is Mode.WARN:
                warnings.warn(mismatch.sentence, CallMismatchWarning, stacklevel=4)
        if self.mode is Mode.RAISE:
            raise CallMismatch(mismatch)


_GLOBAL: Settings | None = None  # every library's, from the environment (the hook) or install()
_OFF = object()


class _OpChecks:
    """The checks of one op (one CustomOp: an op, or an op with its compile-time parameters)."""

    def __init__(self, contract: Contract, settings: Settings, parameters: Mapping[str, Any] | None) -> None:
        self.contract, self.settings, self.parameters = contract, settings, parameters
        self.plan = Plan.of(contract)
        # an op's compile-time parameters are fixed for its CustomOp: wrong for every call, or for none
        self.parameters_wrong = parameter_mismatch(contract, parameters, "") is not None

    def before(self, args: tuple[Any, ...], kwargs: dict[str, Any], frame: FrameType | None) -> None:
        site = _site_of(frame)
        if not kwargs and not self.parameters_wrong and self.plan is not None and matches(self.plan, args):
            self.settings.checked_at(self.contract.op, site)
            return
        where = functools.partial(_shown_site, site)
        mismatch = parameter_mismatch(self.contract, self.parameters, where()) if self.parameters_wrong else None
        unchecked: list[str] = []
        if mismatch is None:
            mismatch, unchecked = explain_call(
                self.contract, args, kwargs, where, _argument_text(site, args, kwargs, self.contract.op)
            )
        for what in unchecked:
            self.settings.note(what)
        self.settings.checked_at(self.contract.op, site)
        if mismatch is not None:
            self.settings.say(mismatch, site)


def _argument_text(site: tuple[str, int], args: tuple[Any, ...], kwargs: Mapping[str, Any], op: str) -> ArgumentText:
    """The program's own text of an argument of the call of ``op`` at ``site`` (for the fix a sentence gives)."""
    count = len(args) + len(kwargs)

    def text(position: int, name: str) -> str | None:
        keyword = name if name in kwargs else None
        return argument_source(site[0], site[1], None if keyword else position, keyword, count, op)

    return text


def _source(library: Any) -> Path | None:
    """The path the library was made from: as given to CustomOpLibrary, or as MAX's own list says (its build of a
    source folder found back by name near the program)."""
    given = library.__dict__.get(_SOURCE)
    if given is not None:
        return Path(given)
    try:
        paths = [Path(p) for p in library._kernel_library.library_paths()]
    except Exception:
        return None
    if not paths:
        return None
    near = tuple(dict.fromkeys(Path(p) for p in (os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[0] or ".")))))
    return built_from(paths[0], near) or paths[0]


def _contracts(library: Any) -> LibraryContracts:
    found: LibraryContracts | None = library.__dict__.get(_CONTRACTS)
    if found is None:
        source = _source(library)
        if source is None:
            found = LibraryContracts(
                "the library",
                unreadable="the library's source is not known (it was made from "
                "a KernelLibrary): its calls are not checked",
            )
        elif source.suffix in COMPILED_SUFFIXES and source.name.startswith("mojo_pkg_"):
            found = LibraryContracts(
                shown(source),
                unreadable=f"the library was built by MAX into {shown(source)} "
                "from a source folder gpudoctor could not find: its calls are not checked (give "
                "gpudoctor.calls.check(library, source=FOLDER))",
            )
        else:
            found = read_contracts(source)
        library.__dict__[_CONTRACTS] = found
    return found


def _prepare(op: Any) -> object:
    """How ``op``'s calls are checked, settled at its first call: its contract and settings, or not at all."""
    state: object = _OFF
    library = getattr(op, "library", None)
    settings = library.__dict__.get(_SETTINGS, _GLOBAL) if library is not None else _GLOBAL
    if settings is not None and settings.mode is not Mode.OFF:
        try:
            contracts = _contracts(library)
            contract = contracts.contracts.get(op.name)
            if contract is None:
                settings.note(contracts.missing(op.name))
            else:
                state = _OpChecks(contract, settings, getattr(op, "parameters", None))
        except Exception as error:  # a library of another shape than the releases this was written for
            settings.note(
                f"gpudoctor could not read what op `{getattr(op, 'name', '?')}` declares ({error}): its "
                "calls are not checked"
            )
    op.__dict__[_STATE] = state
    return state


def _is_compiling() -> Callable[[], bool]:
    """torch's own test for code being traced by torch.compile (whose fake tensors are no call to check)."""
    compiler = getattr(sys.modules.get("torch"), "compiler", None)
    test = getattr(compiler, "is_compiling", None)
    return test if callable(test) else lambda: False


def _wrap_op_class(op_class: type) -> None:
    if op_class.__dict__.get(_PATCHED):
        return
    call: Callable[..., Any] | None = vars(op_class).get("__call__")  # MAX defines it on CustomOp itself
    if call is None:
        return
    compiling = _is_compiling()

    @functools.wraps(call)
    def checked_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not compiling():
            state = self.__dict__.get(_STATE) or _prepare(self)
            if isinstance(state, _OpChecks):
                try:
                    state.before(args, kwargs, sys._getframe(1))
                except CallMismatch:
                    raise
                except Exception as error:  # a check that breaks says so and stands aside
                    self.__dict__[_STATE] = _OFF
                    failed = f"gpudoctor's check of `{self.name}` failed ({type(error).__name__}: {error})"
                    state.settings.note(f"{failed}: its calls are not checked")
        return call(self, *args, **kwargs)

    setattr(op_class, "__call__", checked_call)  # noqa: B010 (mypy refuses assigning a method)
    setattr(op_class, _PATCHED, True)


def _wrap_library_class(library_class: type) -> None:
    if library_class.__dict__.get(_PATCHED):
        return
    init: Callable[..., None] = getattr(library_class, "__init__")  # noqa: B009

    @functools.wraps(init)
    def remembering_init(self: Any, kernel_library: Any, *args: Any, **kwargs: Any) -> None:
        init(self, kernel_library, *args, **kwargs)
        if isinstance(kernel_library, str | os.PathLike):
            self.__dict__[_SOURCE] = Path(kernel_library).absolute()

    setattr(library_class, "__init__", remembering_init)  # noqa: B010
    setattr(library_class, _PATCHED, True)
    op_class = getattr(sys.modules.get(library_class.__module__), "CustomOp", None)
    if isinstance(op_class, type):
        _wrap_op_class(op_class)


def _settings_of(library: Any) -> Settings | None:
    settings: Settings | None = library.__dict__.get(_SETTINGS, _GLOBAL)
    return settings if settings is not None and settings.mode is not Mode.OFF else None


def check_graph_custom(
    library: Any,
    name: str,
    values: Any,
    out_types: Any,
    parameters: Mapping[str, Any] | None,
    frame: FrameType | None,
) -> None:
    """``ops.custom(name, device, values, out_types, parameters)`` inside the graph of a graph_op made with
    ``kernel_library=library``: checked against op ``name``'s contract as a call is — the outputs (``out_types``)
    first, then the inputs (``values``): their count, dtype, rank, one device the op runs on, the sizes a foreach
    reads with, the compile-time parameters. Graph values have no memory: layouts and sharing are the call's."""
    settings = _settings_of(library)
    if settings is None:
        return
    contracts = _contracts(library)
    contract = contracts.contracts.get(name)
    if contract is None:
        settings.note(contracts.missing(name))
        return
    site = _site_of(frame)
    where = functools.partial(_shown_site, site)
    mismatch = parameter_mismatch(contract, parameters, where())
    unchecked: list[str] = []
    if mismatch is None:
        tensors = [graph_tensor(v) for v in [*out_types, *values]]
        given = [t if t is not None else v for t, v in zip(tensors, [*out_types, *values], strict=True)]
        mismatch, unchecked = explain_call(contract, given, {}, where, memory=False)
    for what in unchecked:
        settings.note(what)
    settings.checked_at(contract.op, site)
    if mismatch is not None:
        settings.say(mismatch, site)


def _note(library: Any, what: str) -> None:
    settings = _settings_of(library)
    if settings is not None:
        settings.note(what)


def _patch_bridge(bridge: ModuleType) -> None:
    library_class = getattr(bridge, "CustomOpLibrary", None)
    if isinstance(library_class, type):
        _wrap_library_class(library_class)
        module = sys.modules.get(library_class.__module__)
        if module is not None:
            wrap_graph_building(module, check_graph_custom, _note)
    elif _GLOBAL is not None:
        _GLOBAL.note(f"{bridge.__name__} has no CustomOpLibrary (MAX before 25.4): no call is checked")


def _before_launch(args: tuple[Any, ...]) -> None:
    """cuda.core's launch, checked (calls.launches) with the settings of the process."""
    settings = _GLOBAL
    if settings is None:
        return
    site = _site_of(sys._getframe(2))  # this, the wrapped launch, then the program's line
    try:
        mismatch = check_launch(args, _shown_site(site))
    except Exception as error:  # a driver or a cuda.core of another shape: said once, the launch goes on
        settings.note(f"gpudoctor's check of cuda.core launches failed ({type(error).__name__}: {error})")
        return
    if mismatch is not None:  # (launches are not custom-op calls: no "checked" event, which speaks of those)
        settings.say(mismatch, site)


def _patch(module: ModuleType) -> None:
    """Wrap what ``module`` launches with: MAX's bridge (its custom ops), or cuda.core (its launch)."""
    if module.__name__ in LAUNCHERS or module.__name__.startswith("cuda.core."):  # cuda.core 1.2 is cuda.core.cu13
        wrap_launch(module, _before_launch)
    else:
        _patch_bridge(module)


def install(module: ModuleType | None = None, mode: Mode | None = None) -> None:
    """Check every custom-op call and cuda.core launch of this process (from now on), as ``mode`` says (default: the
    GPUDOCTOR_CALL_CHECKS environment variable): ``module`` (MAX's bridge, or cuda.core) now; without it, each once
    the program imports it."""
    global _GLOBAL
    mode = mode if mode is not None else Mode.from_environment(os.environ)
    if mode is Mode.OFF:
        return
    if _GLOBAL is None or _GLOBAL.mode is not mode:
        _GLOBAL = Settings.of(mode)
    if module is not None:
        _patch(module)
    else:
        watch(_patch)
        watch(_patch, LAUNCHERS, "launch")


def check(library: Any, source: str | os.PathLike[str] | None = None, on_mismatch: str = "raise") -> Any:
    """Check every call of ``library``'s ops against what each op declares in its source, before the call:
    ``on_mismatch="raise"`` (the default) raises CallMismatch instead of making a call that does not match,
    ``"warn"`` warns CallMismatchWarning and makes it. ``source``: the package folder (or .mojo file), when the
    library was made from a compiled package. What cannot be checked is warned once (CallNotCheckedWarning).
    Returns ``library``."""
    settings = Settings.of(Mode(on_mismatch))
    library.__dict__[_SETTINGS] = settings
    if source is not None:
        library.__dict__[_SOURCE] = Path(source).absolute()
    library.__dict__.pop(_CONTRACTS, None)
    _wrap_library_class(type(library))
    for op in library.__dict__.get("_ops", {}).values():  # ops already called: settled again at their next call
        for specialised in [op, *op.__dict__.get("_parameter_specializations", {}).values()]:
            specialised.__dict__.pop(_STATE, None)
    contracts = _contracts(library)
    if contracts.unreadable:
        settings.note(contracts.unreadable)
    return library
