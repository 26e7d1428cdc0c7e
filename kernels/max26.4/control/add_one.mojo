# Control kernel for MAX 26.4: `extensibility`, `def`, `std.gpu.host.DeviceContext`, `Coord` indices;
# the element function is a @parameter closure passed to foreach as a parameter. output = input + 1.
from extensibility import register, InputTensor, OutputTensor, foreach
from std.gpu.host import DeviceContext
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
