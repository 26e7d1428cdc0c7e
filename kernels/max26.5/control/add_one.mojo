# Control kernel for MAX 26.5-26.6: as 26.4's, with DeviceContext from `max.gpu.host`.
# The element function is a @parameter closure passed to foreach as a parameter. output = input + 1.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from std.utils.coord import Coord


@register("add_one")
struct AddOne:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        @parameter
        @always_inline
        def add_one[width: Int](idx: Coord) -> SIMD[DType.float32, width]:
            return input.load[width](idx) + 1

        foreach[add_one, target=target](output, ctx)
