"""JITFunction's launch path, as in Triton 3.x's triton/runtime/jit.py (see the package's docstring)."""

import inspect

from triton.runtime.driver import driver


class KernelInterface:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid=grid, warmup=False, *args, **kwargs)  # noqa: B026 (as Triton writes it)


class JITFunction(KernelInterface):
    def __init__(self, fn):
        self.fn = fn
        self.arg_names = list(inspect.signature(fn).parameters)
        self.__name__ = fn.__name__
        self.launches = 0

    def run(self, *args, grid, warmup, **kwargs):
        if warmup:  # compiles only
            return self
        device = f"cuda:{driver.active.get_current_device()}"
        for position, value in enumerate(args):
            if hasattr(value, "data_ptr") and str(value.device) != device:
                raise ValueError(f"Pointer argument (at {position}) cannot be accessed from Triton (cpu tensor?)")
        self.launches += 1
        return self


def jit(fn):
    return JITFunction(fn)
