"""Probe cuda-graph-arg-lifetime: does cuda.core's GraphDefinition.launch keep a kernel argument (an
inline Buffer) alive for the graph's lifetime? (seed 003). Checked with a weakref; the graph is only
launched when the buffer is still alive, so a stale pointer is never launched.

Run by hand: python probes/cuda_graph_arg_lifetime.py --device cuda
"""

import ctypes
import gc
import weakref

from _harness import run_probe


def main(ctx):
    ctx.step("import cuda.core")
    import cuda.core as core

    ctx.detail("cuda_core", getattr(core, "__version__", None))
    try:
        from cuda.core.graph import GraphDefinition
    except ImportError as error:
        ctx.skip("this cuda.core has no cuda.core.graph.GraphDefinition (%s)" % error)
    from cuda.bindings import driver as drv
    from cuda.core import Device, DeviceMemoryResource, LaunchConfig, Program, ProgramOptions

    ctx.step("create device, stream and memory resource")
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    memory = DeviceMemoryResource(dev)
    arch = "".join(str(i) for i in dev.compute_capability)
    ctx.step("compile add_one for sm_%s with NVRTC" % arch)
    program = Program("__global__ void add_one(int *a) { *a += 1; }", code_type="c++",
                      options=ProgramOptions(std="c++17", arch="sm_%s" % arch))
    kernel = program.compile("cubin", name_expressions=("add_one",)).get_kernel("add_one")
    buffer = memory.allocate(ctypes.sizeof(ctypes.c_int), stream=stream)
    stream.sync()
    (status,) = drv.cuMemcpyHtoD(int(buffer.handle), (ctypes.c_int * 1)(0), ctypes.sizeof(ctypes.c_int))
    ctx.check(int(status) == 0, "cuMemcpyHtoD failed: %s" % status)
    alive = weakref.ref(buffer)
    ctx.step("GraphDefinition.launch with the buffer passed inline, then drop it")
    graph = GraphDefinition()
    graph.launch(LaunchConfig(grid=1, block=1), kernel, buffer)
    handle = int(buffer.handle)
    del buffer
    gc.collect()
    kept = alive() is not None
    ctx.detail("graph_keeps_argument_alive", kept)
    ctx.check(kept, "GraphDefinition.launch does not keep its kernel arguments alive: the Buffer was freed "
                    "while the graph still points at it (seed 003); keep a reference to every argument until "
                    "the graph has run, or upgrade cuda-core")
    ctx.step("instantiate and launch the graph")
    graph.instantiate().launch(stream)
    stream.sync()
    host = (ctypes.c_int * 1)(0)
    (status,) = drv.cuMemcpyDtoH(host, handle, ctypes.sizeof(ctypes.c_int))
    ctx.check(int(status) == 0, "cuMemcpyDtoH failed: %s" % status)
    ctx.check(host[0] == 1, "the graph's kernel wrote %d, expected 1" % host[0])
    return "GraphDefinition keeps kernel arguments alive; the graph ran and wrote 1"


run_probe("cuda-graph-arg-lifetime", main, devices=("cuda",))
