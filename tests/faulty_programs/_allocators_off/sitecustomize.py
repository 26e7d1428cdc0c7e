"""Turn CuPy's memory pool off as soon as CuPy is imported, so every array is its own allocation and
compute-sanitizer sees an access past an array (torch's switch is PYTORCH_NO_CUDA_MEMORY_CACHING=1)."""

import importlib.abc
import sys


class _AfterCupy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "cupy":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_unpool(module):
            exec_module(module)
            module.cuda.set_allocator(None)
            module.cuda.set_pinned_memory_allocator(None)

        spec.loader.exec_module = exec_then_unpool
        return spec


sys.meta_path.insert(0, _AfterCupy())
