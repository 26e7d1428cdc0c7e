"""Custom-op calls checked against what each op declares in its Mojo source, before the call: argument count and
order, each tensor's dtype and rank, one device among the op's targets, outputs apart from inputs, compile-time
parameters, and the sizes a ``foreach`` reads with. `gpudoctor run` turns it on in your program (off with
``--no-call-checks``); from Python::

    import gpudoctor.calls
    ops = gpudoctor.calls.check(CustomOpLibrary(Path("kernels")))   # raises CallMismatch before a wrong call

or for a whole test suite, ``GPUDOCTOR_CALL_CHECKS=raise pytest`` (gpudoctor's pytest plugin installs them) or
``PYTHONPATH=$(python -m gpudoctor.calls) GPUDOCTOR_CALL_CHECKS=raise python prog.py``. Modules: ``contract`` (what
an op declares), ``check`` (one call against it), ``wrap`` (inside the program), ``bridge`` (waiting for MAX's
bridge), ``channel`` (switches and side channel), ``startup`` (the hook). See docs/call-checks.md.

Triton and CuPy kernel launches are checked too (``install_launches``, on under `gpudoctor run`): every tensor of a
Triton launch on the launch's device (``triton_launches``), each argument of a CuPy RawKernel launch against the
kernel's C signature (``signature``, ``cupy_launches``); ``launch_wrap`` wraps them inside the program.
"""

from gpudoctor.calls.channel import FILE_ENV, HOOK_DIR, MODE_ENV, Mode
from gpudoctor.calls.check import CallMismatch, CallMismatchWarning, CallNotCheckedWarning, Mismatch
from gpudoctor.calls.launch_wrap import install_launches
from gpudoctor.calls.wrap import check, install

__all__ = [
    "FILE_ENV",
    "HOOK_DIR",
    "MODE_ENV",
    "CallMismatch",
    "CallMismatchWarning",
    "CallNotCheckedWarning",
    "Mismatch",
    "Mode",
    "check",
    "install",
    "install_launches",
]
