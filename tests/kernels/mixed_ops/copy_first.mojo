# Seed 000's kernel in Mojo 1.x syntax: `execute` writes output[0, 0] from host code.
# On the CPU tensor memory is host memory, so this passes; on a GPU it dereferences a device
# pointer on the host and the process dies with SIGSEGV.
from extensibility import register, InputTensor, OutputTensor
from max.gpu.host import DeviceContext


@register("copy_first")
struct CopyFirst:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        output[0, 0] = input[0, 0]
