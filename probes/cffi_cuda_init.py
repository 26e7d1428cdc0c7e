"""Probe cffi-cuda-init: libcuda through cffi (ABI mode) on the main thread and on a side thread, and a
libnvJitLink linker handle created and destroyed from a side thread (where seed 001 segfaulted).

Run by hand: python probes/cffi_cuda_init.py --device cuda
"""

import ctypes.util
import glob
import os
import sys
import threading

from _harness import CheckFailed, run_probe

CUDA_CDEF = """
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
CUresult cuInit(unsigned int Flags);
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuGetErrorName(CUresult error, const char **pStr);
"""
_CC_MAJOR, _CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{MAJOR,MINOR}


def _nvjitlink_candidates():
    """libnvJitLink from pip's nvidia-* wheels, CUDA_HOME, the usual toolkit folder, or the loader path."""
    roots = [os.path.join(p, "nvidia") for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]
    found = []
    for root in roots:
        found += sorted(glob.glob(os.path.join(root, "*", "lib", "libnvJitLink.so*")))
    for home in filter(None, [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]):
        found += sorted(glob.glob(os.path.join(home, "lib64", "libnvJitLink.so*")))
    by_loader = ctypes.util.find_library("nvJitLink")
    if by_loader:
        found.append(by_loader)
    return found


class Driver(object):
    def __init__(self, ctx):
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(CUDA_CDEF)
        ctx.step("dlopen libcuda.so.1 through cffi")
        try:
            self.lib = self.ffi.dlopen("libcuda.so.1")
        except OSError as error:
            ctx.skip("libcuda.so.1 cannot be loaded: %s" % error)

    def call(self, name, *args):
        result = getattr(self.lib, name)(*args)
        if result != 0:
            text = self.ffi.new("const char **")
            self.lib.cuGetErrorName(result, text)
            name_text = self.ffi.string(text[0]).decode() if text[0] != self.ffi.NULL else "?"
            raise CheckFailed("%s returned %d (%s)" % (name, result, name_text))

    def init_and_context(self, ctx, where):
        ctx.step("cuInit on the %s" % where)
        self.call("cuInit", 0)
        version = self.ffi.new("int *")
        self.call("cuDriverGetVersion", version)
        count = self.ffi.new("int *")
        self.call("cuDeviceGetCount", count)
        ctx.check(count[0] > 0, "cuDeviceGetCount found no device on the %s" % where)
        device = self.ffi.new("CUdevice *")
        self.call("cuDeviceGet", device, 0)
        ctx.step("cuCtxCreate/cuCtxDestroy on the %s" % where)
        context = self.ffi.new("CUcontext *")
        self.call("cuCtxCreate_v2", context, 0, device[0])
        self.call("cuCtxDestroy_v2", context[0])
        major, minor = self.ffi.new("int *"), self.ffi.new("int *")
        self.call("cuDeviceGetAttribute", major, _CC_MAJOR, device[0])
        self.call("cuDeviceGetAttribute", minor, _CC_MINOR, device[0])
        return version[0], count[0], (major[0], minor[0])


def _on_side_thread(function):
    outcome = {}

    def body():
        try:
            outcome["value"] = function()
        except BaseException as error:
            outcome["error"] = error

    thread = threading.Thread(target=body, name="gpudoctor-side-thread")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _nvjitlink(ctx, capability):
    import cffi

    candidates = _nvjitlink_candidates()
    if not candidates:
        ctx.detail("nvjitlink", "not found")
        return "libnvJitLink not found (not tried)"
    path = candidates[-1]
    ffi = cffi.FFI()
    # nvJitLink.h maps nvJitLinkCreate to a versioned symbol (__nvJitLinkCreate_12_0, ...): try them all.
    names = ["nvJitLinkCreate"] + ["__nvJitLinkCreate_%d_%d" % (major, minor)
                                   for major in (13, 12) for minor in range(9, -1, -1)]
    destroy_names = ["nvJitLinkDestroy"] + [n.replace("Create", "Destroy") for n in names[1:]]
    ffi.cdef("typedef struct nvJitLink *nvJitLinkHandle; typedef int nvJitLinkResult;")
    for name in names:
        ffi.cdef("nvJitLinkResult %s(nvJitLinkHandle *handle, uint32_t numOptions, const char **options);" % name)
    for name in destroy_names:
        ffi.cdef("nvJitLinkResult %s(nvJitLinkHandle *handle);" % name)
    ctx.step("dlopen %s through cffi" % os.path.basename(path))
    lib = ffi.dlopen(path)
    create = destroy = None
    for create_name, destroy_name in zip(names, destroy_names):
        try:
            create, destroy = getattr(lib, create_name), getattr(lib, destroy_name)
            ctx.detail("nvjitlink_symbol", create_name)
            break
        except AttributeError:
            continue
    ctx.check(create is not None, "%s exports no nvJitLinkCreate symbol" % path)
    ctx.detail("nvjitlink", os.path.basename(path))

    def create_and_destroy():
        handle = ffi.new("nvJitLinkHandle *")
        arch = ffi.new("char[]", ("-arch=sm_%d%d" % capability).encode())
        options = ffi.new("const char *[1]", [arch])
        result = create(handle, 1, options)
        ctx.check(result == 0, "nvJitLinkCreate returned %d" % result)
        result = destroy(handle)
        ctx.check(result == 0, "nvJitLinkDestroy returned %d" % result)

    ctx.step("nvJitLinkCreate/Destroy on a side thread")
    _on_side_thread(create_and_destroy)
    ctx.step("nvJitLinkCreate/Destroy on the main thread")
    create_and_destroy()
    return "nvJitLink linker handle works on main and side threads"


def main(ctx):
    driver = Driver(ctx)
    version, count, capability = driver.init_and_context(ctx, "main thread")
    ctx.detail("cuda_driver_version", version)
    ctx.detail("device_count", count)
    _on_side_thread(lambda: driver.init_and_context(ctx, "side thread"))
    jitlink = _nvjitlink(ctx, capability)
    return "cuInit and cuCtxCreate through cffi work on main and side threads; %s" % jitlink


run_probe("cffi-cuda-init", main, devices=("cuda",))
