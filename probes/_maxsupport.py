"""What the MAX probes share: finding MAX's torch bridge across API generations, and the control kernels.

MAX moved its PyTorch bridge from ``max.torch`` to ``max.experimental.torch`` (26.7), and Mojo 1.x
changed the kernel language; the probes cope with both generations here, in one place.
Standard library only at import time; compatible with Python 3.8.
"""

import os
import re

from _harness import CheckFailed, Skip

BRIDGE_MODULES = ("max.torch", "max.experimental.torch")
_FLOAT8_ALIAS = "float8_e8m0fnu"


class BridgeMissingFloat8(CheckFailed):
    """MAX's torch bridge needs torch.float8_e8m0fnu, which this torch lacks."""


def import_bridge(ctx):
    """Import MAX's torch bridge, whichever module this MAX has; record which one it was."""
    import importlib

    tried = []
    for name in BRIDGE_MODULES:
        ctx.step("import %s" % name)
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            # Only "this module does not exist" moves on; a failure inside the bridge is the finding.
            if error.name is not None and name.startswith(error.name):
                tried.append("%s (%s)" % (name, error))
                continue
            raise
        except AttributeError as error:
            if _FLOAT8_ALIAS in str(error):
                import torch

                raise BridgeMissingFloat8(
                    "%s failed at import: torch %s has no torch.%s, which MAX's bridge maps to "
                    "DType.%s (%s)" % (name, torch.__version__, _FLOAT8_ALIAS, _FLOAT8_ALIAS, error)
                )
            raise
        ctx.detail("bridge_module", name)
        return module
    raise CheckFailed("no MAX torch bridge found: " + "; ".join(tried))


def max_version():
    try:
        from importlib import metadata

        return metadata.version("max")
    except Exception:
        return None


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text or "")[:2])


def kernel_generations():
    """Control-kernel folders to try, the one matching the installed MAX first."""
    version = _version_tuple(max_version())
    # Mojo 1.x (def, extensibility, max.gpu.host) arrived with MAX 26.7.
    modern_first = not version or version >= (26, 7)
    return ("mojo1", "legacy") if modern_first else ("legacy", "mojo1")


def kernels_root(ctx):
    root = getattr(ctx.options, "kernels", None) or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels"
    )
    if not os.path.isdir(root):
        # Installed from a wheel: probes and kernels are siblings under gpudoctor/_data.
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "kernels")
    return os.path.abspath(root)


def add_kernel_arguments(parser):
    parser.add_argument("--kernels", help="folder holding the control kernel generations (default: ../kernels)")


def compile_diagnostics(text):
    """Every "file:line:col: error: ..." line of a Mojo compile failure, with the notes that follow."""
    lines = []
    for line in str(text).splitlines():
        if ": error:" in line or (lines and ": note:" in line):
            lines.append(line.strip())
    return lines


def first_compiler_error(text):
    """The first Mojo diagnostic line ("file:line:col: error: ...") in a compile failure."""
    diagnostics = compile_diagnostics(text)
    if diagnostics:
        return diagnostics[0]
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[0].strip() if lines else str(text)


def is_compile_error(error):
    return type(error).__name__ == "MojoCompilationError" or "error compiling mojo" in str(error).lower()


def load_control_library(ctx, bridge, package="control"):
    """CustomOpLibrary over the control kernels of the first generation that compiles here.

    Returns (library, kernel_dir). A MAX for which no generation compiles is "unsupported by this
    probe" (a skip naming the compiler's first error), not a failure of the user's stack.
    """
    from pathlib import Path

    root = kernels_root(ctx)
    errors = []
    for generation in kernel_generations():
        path = Path(root) / generation / package
        ctx.step("compile %s/%s with CustomOpLibrary" % (generation, package))
        try:
            library = bridge.CustomOpLibrary(path)
        except Exception as error:
            if is_compile_error(error):
                errors.append("%s: %s" % (generation, first_compiler_error(error)))
                continue
            raise
        ctx.detail("kernel_generation", generation)
        return library, path
    raise Skip(
        "unsupported by this probe: no control-kernel generation compiles with MAX %s (%s)"
        % (max_version(), " | ".join(errors))
    )


def torch_device(ctx):
    """The torch device string for this variant, after checking torch can use it."""
    import torch

    if ctx.device == "cuda":
        ctx.check(torch.cuda.is_available(), "torch.cuda.is_available() is False")
        return "cuda"
    return "cpu"


def expect_equal(ctx, actual, expected, what):
    """Compare two torch tensors exactly (small integers in float32), with a readable failure.

    On a GPU it synchronises first, so an asynchronous kernel failure surfaces here, in this step.
    """
    import torch

    if actual.is_cuda:
        ctx.step("synchronize before checking %s" % what)
        torch.cuda.synchronize()
    actual_cpu = actual.detach().to("cpu")
    expected_cpu = expected.detach().to("cpu")
    ctx.check(
        actual_cpu.shape == expected_cpu.shape and bool(torch.equal(actual_cpu, expected_cpu)),
        "%s: expected %s, got %s" % (what, expected_cpu.tolist(), actual_cpu.tolist()),
    )
