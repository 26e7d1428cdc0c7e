"""``ops.custom`` inside a ``graph_op``: while MAX builds the graph of a graph_op made with ``kernel_library=...``
(``MaxOp.graph``), each ``max.graph.ops.custom(name, device, values, out_types, parameters)`` is checked against op
``name``'s contract as a call is (``calls.check``, without memory: graph values have none), with the settings and side
channel of ``calls.wrap`` (which hands in the check). MAX is never imported here: its modules are handed in."""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Mapping
from types import FrameType, ModuleType
from typing import Any

from gpudoctor.calls.check import CallMismatch

_PATCHED = "_gpudoctor_calls_graph_patched"  # on MaxOp: wrapped already
# check(library, op name, values, out_types, parameters, the calling frame); note(library, what could not be checked)
Check = Callable[[Any, str, Any, Any, "Mapping[str, Any] | None", "FrameType | None"], None]
Note = Callable[[Any, str], None]

_BUILDING = threading.local()  # .libraries: the libraries of the graph_ops whose graphs this thread builds now


def wrap_graph_building(module: ModuleType, check: Check, note: Note) -> None:
    """graph_op's graphs: while MaxOp builds one for a function of the user's (not for an eager op, whose call was
    checked already), ``ops.custom`` is checked against the contracts of that graph_op's kernel library."""
    max_op = getattr(module, "MaxOp", None)
    op_class = getattr(module, "CustomOp", None)
    graph_module = sys.modules.get("max.graph.ops")
    build: Callable[..., Any] | None = vars(max_op).get("graph") if isinstance(max_op, type) else None
    custom: Callable[..., Any] | None = getattr(graph_module, "custom", None)
    if build is None or custom is None or max_op.__dict__.get(_PATCHED):
        return

    @functools.wraps(build)
    def building(self: Any, *args: Any, **kwargs: Any) -> Any:
        eager = isinstance(op_class, type) and isinstance(self.fn, op_class)
        stack = _BUILDING.__dict__.setdefault("libraries", [])
        stack.append(None if eager else getattr(self, "library", None))
        try:
            return build(self, *args, **kwargs)
        finally:
            stack.pop()

    @functools.wraps(custom)
    def checked_custom(name: str, device: Any, values: Any, out_types: Any, *args: Any, **kwargs: Any) -> Any:
        stack = _BUILDING.__dict__.get("libraries")
        library = stack[-1] if stack else None
        if library is not None:
            parameters = kwargs.get("parameters", args[0] if args else None)
            try:
                check(library, name, values, out_types, parameters, sys._getframe(1))
            except CallMismatch:
                raise
            except Exception as error:  # a check that breaks says so and stands aside
                note(library, f"gpudoctor's check of ops.custom(`{name}`) failed ({type(error).__name__}: {error})")
        return custom(name, device, values, out_types, *args, **kwargs)

    setattr(max_op, "graph", building)  # noqa: B010
    setattr(max_op, _PATCHED, True)
    setattr(graph_module, "custom", checked_custom)  # noqa: B010
