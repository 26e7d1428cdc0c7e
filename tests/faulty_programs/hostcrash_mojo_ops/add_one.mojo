# add_one: output = input + 1, element by element, in the 26.7 style. The op is correct; hostcrash_mojo.py calls
# it with its input left on the CPU.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


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
        def add_one[width: Int](idx: Coord) {input} -> SIMD[DType.float32, width]:
            return input.load[width](idx) + 1

        foreach[target=target](add_one, output, ctx)
