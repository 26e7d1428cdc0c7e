"""Probe custom-op-source: CustomOpLibrary handed the control kernel's source folder, as users' code does.

Run by hand: python probes/custom_op_source.py
MAX builds the folder itself (`mojo precompile`, `mojo package` before 26.6) and loads it; the build is the
same for every device, so it runs once here, without a device. The runs that call the op (custom-op and
the other control probes) load a cached compiled copy built by the same compiler (see
_maxsupport.compiled_package), so a failure that only this run shows is in MAX's handling of a source
folder, not in the kernel or the device.
"""

from _harness import CheckFailed, run_probe
from _maxsupport import add_kernel_arguments, import_bridge, load_control_library

CONTROL_OPS = ("add_one", "scale")


def main(ctx):
    ctx.step("import torch")
    import torch  # noqa: F401  (the bridge needs it; its import time belongs to this step, not the bridge's)

    bridge = import_bridge(ctx)
    library, source = load_control_library(ctx, bridge, from_source=True)
    ctx.step("look up the control ops in the library")
    missing = []
    for name in CONTROL_OPS:
        # An op the library failed to register raises its own error here (MAX defers it to the lookup).
        if not hasattr(library, name):
            missing.append(name)
    if missing:
        raise CheckFailed("CustomOpLibrary built %s but has no %s" % (source, ", ".join(missing)))
    return "CustomOpLibrary built the control kernel from its source folder (%s)" % ", ".join(CONTROL_OPS)


run_probe("custom-op-source", main, devices=(), add_arguments=add_kernel_arguments)
