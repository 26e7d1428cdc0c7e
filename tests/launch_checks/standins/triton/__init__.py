"""A stand-in for Triton where no CUDA GPU is (this machine): the launch path gpudoctor wraps, as Triton 3.x has it
(triton/runtime/jit.py: ``kernel[grid](...)`` is ``KernelInterface.__getitem__``'s proxy calling
``JITFunction.run(self, *args, grid, warmup, **kwargs)``; ``arg_names`` from the function's signature), and the
launcher's pointer check (third_party/nvidia/backend/driver.py: a tensor the current device cannot reach is
"Pointer argument (at N) cannot be accessed from Triton (cpu tensor?)"). Nothing is compiled or run."""

from triton.runtime.jit import JITFunction, jit

__all__ = ["JITFunction", "jit"]
