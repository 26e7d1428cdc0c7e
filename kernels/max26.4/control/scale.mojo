# Control kernel with a defaulted compile-time parameter (seed 002); same generation as add_one.mojo.
from extensibility import register, InputTensor, OutputTensor, foreach
from std.gpu.host import DeviceContext
from std.utils.coord import Coord


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
        @parameter
        @always_inline
        def scale[width: Int](idx: Coord) -> SIMD[DType.float32, width]:
            return input.load[width](idx) * Float32(factor)

        foreach[scale, target=target](output, ctx)
