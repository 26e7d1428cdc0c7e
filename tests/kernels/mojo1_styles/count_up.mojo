# count_up: int32 in, int32 out, declared with 26.7's dtype shorthand (`dtype = .int32`); the element function's
# signature spans lines and captures `input` in a capture list.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


@register("count_up")
struct CountUp:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = .int32, rank=2, ...],
        input: InputTensor[dtype = .int32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        def plus_one[
            width: Int,
        ](
            idx: Coord,
        ) {input} -> SIMD[DType.int32, width]:
            return input.load[width](idx) + 1

        foreach[target=target](plus_one, output, ctx)
