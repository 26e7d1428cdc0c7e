# add_into: meant to copy its input; on every device it returns what the output holds plus the input (`+=` written
# as a foreach), so it is right only when the output starts at zero. MAX 26.7's CPU path hands the op a zeroed
# buffer of its own the first time; on a GPU the op sees the caller's output.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


@register("add_into")
struct AddInto:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        var held = output.unsafe_ptr()
        var columns = input.dim_size(1)

        def add[width: Int](idx: Coord) {input, held, columns} -> SIMD[DType.float32, width]:
            var offset = Int(idx[0]) * columns + Int(idx[1])
            return held.load[width=width](offset) + input.load[width](idx)

        foreach[target=target](add, output, ctx)
