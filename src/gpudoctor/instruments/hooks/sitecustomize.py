"""Put on PYTHONPATH by gpudoctor's memcheck rerun: turns CuPy's memory pools off as CuPy is imported, so every
array is its own allocation and compute-sanitizer sees an access past one (torch's switch is the environment's
PYTORCH_NO_CUDA_MEMORY_CACHING=1). Then it hands over to the program's own sitecustomize, if it has one.
Standard library only; nothing is imported at start."""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

_HERE = os.path.dirname(os.path.abspath(__file__))


class _PoolsOffAfterCupy(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "cupy":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def execute_then_pools_off(module: ModuleType) -> None:
            execute(module)
            module.cuda.set_allocator(None)
            module.cuda.set_pinned_memory_allocator(None)

        loader.exec_module = execute_then_pools_off  # type: ignore[method-assign]
        return spec


sys.meta_path.insert(0, _PoolsOffAfterCupy())
# the program's own sitecustomize, which this one shadows
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]
_ours = sys.modules.pop("sitecustomize", None)
try:
    import sitecustomize  # type: ignore[import-not-found]  # noqa: F401
except ImportError:
    # none of the program's own: this module stays in its place (site takes it back out of sys.modules by its name
    # once it has run, and an empty place is "Error in sitecustomize; KeyError: 'sitecustomize'")
    if _ours is not None:
        sys.modules["sitecustomize"] = _ours
