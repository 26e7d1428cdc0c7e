"""A stand-in for CuPy where no CUDA GPU is (this machine): RawKernel and RawModule as CuPy 13 has them
(cupy/_core/raw.pyx: ``RawKernel(code, name, options=(), backend="nvrtc", *, translate_cucomplex, ...)``, launched
as ``kernel(grid, block, args)``; ``RawModule(code=...).get_function(name)``), and device arrays that carry a dtype
and a ``__cuda_array_interface__``. A launch records its arguments; nothing is compiled or run."""

import numpy


class ndarray:
    def __init__(self, values, dtype):
        self.host = numpy.asarray(values, dtype=dtype)
        self.dtype = self.host.dtype

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.host.shape, "typestr": self.dtype.str, "data": (1 << 40, False), "version": 3}


def asarray(values, dtype=None):
    return ndarray(values, dtype or numpy.asarray(values).dtype)


float32, float64, int32 = numpy.float32, numpy.float64, numpy.int32


class RawKernel:
    def __init__(
        self,
        code,
        name,
        options=(),
        backend="nvrtc",
        *,
        translate_cucomplex=False,
        enable_cooperative_groups=False,
        jitify=False,
    ):
        self.code, self.name, self.options, self.backend = code, name, options, backend
        self.translate_cucomplex, self.enable_cooperative_groups, self.jitify = (
            translate_cucomplex,
            enable_cooperative_groups,
            jitify,
        )
        self.file_path, self.name_expressions = None, None
        self.launched = []

    def __call__(self, grid, block, args, **kwargs):
        self.launched.append(tuple(args))


class RawModule:
    def __init__(
        self,
        *,
        code=None,
        path=None,
        options=(),
        backend="nvrtc",
        translate_cucomplex=False,
        enable_cooperative_groups=False,
        name_expressions=None,
        jitify=False,
    ):
        self.code, self.file_path, self.options, self.backend = code, path, options, backend
        self.translate_cucomplex, self.enable_cooperative_groups, self.jitify = (
            translate_cucomplex,
            enable_cooperative_groups,
            jitify,
        )
        self.name_expressions = tuple(name_expressions) if name_expressions else None

    def get_function(self, name):
        kernel = RawKernel(self.code, name, self.options, self.backend)
        kernel.file_path, kernel.name_expressions = self.file_path, self.name_expressions
        return kernel
