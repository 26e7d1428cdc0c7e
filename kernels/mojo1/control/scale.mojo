# Control kernel with a compile-time parameter that has a default (seed 002):
# output = input * factor, callable as `ops.scale(out, x)` or `ops.scale[{"factor": 3}](out, x)`.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


@register("scale")
struct Scale:
    @staticmethod
    def execute[
        target: StaticString,
        factor: Int = 2,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        def scale[width: Int](idx: Coord) {input} -> SIMD[DType.float32, width]:
            return input.load[width](idx) * Float32(factor)

        foreach[target=target](scale, output, ctx)
