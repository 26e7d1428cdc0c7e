"""Watching for the launchers the checks wrap — MAX's torch bridge (``max.experimental.torch``, ``max.torch`` before
MAX 26.2), cuda.core, Triton and CuPy: a meta-path finder lets the import run, then hands the module to a callback; a
program that never imports them meets nothing else. Standard library only and nothing imported at start: the
start-up hook loads this file by its path."""

import sys

TYPE_CHECKING = False  # typing itself costs a start ~15 ms; mypy reads this as typing's

if TYPE_CHECKING:  # nothing more at start: importlib.abc alone pulls pathlib, tempfile and re in (~30 ms)
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

    Callback = Callable[[ModuleType], None]

BRIDGES = ("max.experimental.torch", "max.torch")
LAUNCHERS = ("cuda.core", "cuda.core.experimental")
# the kernel languages whose launches are checked (calls.launch_wrap): each module, and what it has once imported
FRAMEWORKS = (("triton", "jit"), ("cupy", "RawKernel"))


class AfterBridge:
    """A meta-path finder (``find_spec`` is all one needs) that finds nothing itself: it wraps the module's own loader
    so that ``callback`` gets the module once it has run."""

    def __init__(self, callback: "Callback", names: tuple[str, ...]) -> None:
        self.callback, self.names = callback, names
        self.finding = False

    def find_spec(
        self, name: str, path: "Sequence[str] | None" = None, target: "ModuleType | None" = None
    ) -> "ModuleSpec | None":
        if name not in self.names or self.finding:
            return None
        import importlib.util  # here, not at start: it pulls contextlib, functools and collections in

        self.finding = True  # the real spec, found by the finders after this one
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        finally:
            self.finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        execute = loader.exec_module

        def execute_then_hand_over(module: "ModuleType") -> None:
            execute(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            # the program imports its module whatever the checks meet (no contextlib: not imported at start)
            try:  # noqa: SIM105
                self.callback(module)
            except Exception:
                pass

        loader.exec_module = execute_then_hand_over  # type: ignore[method-assign]
        return spec


def watch(callback: "Callback", names: tuple[str, ...] = BRIDGES, attribute: str = "CustomOpLibrary") -> None:
    """``callback(module)`` now if one of ``names`` is imported already (with ``attribute``), else once the program
    imports one."""
    for name in names:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, attribute):
            callback(module)
            return
    sys.meta_path.insert(0, AfterBridge(callback, names))
