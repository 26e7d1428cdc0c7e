"""Put first on PYTHONPATH by `gpudoctor run` (GPUDOCTOR_CALL_CHECKS=record) or by you (=warn, =raise; see
docs/call-checks.md): when the program imports MAX's torch bridge (or cuda.core, Triton, CuPy), and only then,
gpudoctor.calls wraps its custom ops (its launches) so that each call is checked before it proceeds. Then it hands
over to the program's own sitecustomize.
Standard library only: at start it reads one variable and, when the checks are on, leaves a meta-path finder."""

import os
import sys

TYPE_CHECKING = False  # typing itself costs a start ~15 ms; mypy reads this as typing's

if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_CALLS = os.path.dirname(_HERE)
_ROOT = os.path.dirname(os.path.dirname(_CALLS))  # the folder holding the gpudoctor package
_MODES = ("record", "warn", "raise")  # gpudoctor.calls.channel.Mode, but off (a test keeps them equal)


def _say(what: str) -> None:
    """What could not be checked, where the run reads it (or on stderr)."""
    import json

    path = os.environ.get("GPUDOCTOR_CALL_CHECKS_FILE")
    try:
        if path:
            with open(path, "a", encoding="utf-8") as channel:
                channel.write(json.dumps({"event": "unchecked", "what": what}) + "\n")
        else:
            sys.stderr.write(f"gpudoctor: {what}\n")
    except OSError:
        pass


def _checks_on(launcher: "ModuleType") -> None:
    """Import gpudoctor's checks (from this folder's own tree, which an interpreter without gpudoctor lacks) and
    wrap what the launcher's module calls (Triton's and CuPy's kernels: calls.launch_wrap); the tree leaves sys.path
    again at once."""
    try:
        added = _ROOT not in sys.path
        if added:
            sys.path.insert(0, _ROOT)
        kernels = launcher.__name__ in ("triton", "cupy")  # their kernels' launches, not MAX's or cuda.core's
        try:
            import importlib

            checks = importlib.import_module("gpudoctor.calls.launch_wrap" if kernels else "gpudoctor.calls.wrap")
        finally:
            if added:
                sys.path.remove(_ROOT)
        (checks.install_launches if kernels else checks.install)(launcher)
    except Exception as error:
        _say(f"gpudoctor's call checks could not start ({type(error).__name__}: {error}): no call is checked")


def _watch() -> None:
    """Load gpudoctor.calls.bridge by its path, with the kind of loader that loaded this file (importing importlib's
    own modules would cost the start more than the rest of this hook), and leave its finders, for MAX's bridge and
    for cuda.core."""
    name, path = "_gpudoctor_calls_bridge", os.path.join(_CALLS, "bridge.py")
    bridge = type(sys)(name)
    bridge.__file__ = path
    loader: Any = type(globals().get("__loader__"))
    if loader.__name__ == "SourceFileLoader":
        loader(name, path).exec_module(bridge)
    else:
        from importlib.machinery import SourceFileLoader

        SourceFileLoader(name, path).exec_module(bridge)
    bridge.watch(_checks_on)
    bridge.watch(_checks_on, bridge.LAUNCHERS, "launch")
    for name, attribute in bridge.FRAMEWORKS:
        bridge.watch(_checks_on, (name,), attribute)


if os.environ.get("GPUDOCTOR_CALL_CHECKS", "").strip().lower() in _MODES:
    try:  # noqa: SIM105 (no contextlib at start: the program starts whatever happens here)
        _watch()
    except Exception:
        pass
# the program's own sitecustomize, which this one shadows; without one, this module stays in its place (importlib
# takes the module back out of sys.modules by its name once it has run: an empty place is "Error in sitecustomize")
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]
_THIS = sys.modules.pop("sitecustomize", None)
try:
    import sitecustomize  # type: ignore[import-not-found]  # noqa: F401
except ImportError:
    if _THIS is not None:
        sys.modules["sitecustomize"] = _THIS
