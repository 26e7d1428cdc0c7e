# add_bias: output = input + bias, where bias is meant to be broadcast but is read with the output's indices. A bias
# smaller than the output is read past its end: on the CPU and on a GPU with torch's caching allocator the values
# come from neighbouring memory, so the op returns a plausible result and nothing crashes. compute-sanitizer's
# memcheck, with the allocator off, names the read.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


@register("add_bias")
struct AddBias:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        bias: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        def add[width: Int](idx: Coord) {input, bias} -> SIMD[DType.float32, width]:
            return input.load[width](idx) + bias.load[width](idx)  # bias is 2x2: read past it

        foreach[target=target](add, output, ctx)
