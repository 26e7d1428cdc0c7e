# add_one, except that the GPU branch adds 2: the CPU-vs-GPU comparison must catch it.
# Host code in `execute` indexes tensors only under a CPU-only branch, which is safe.
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
            comptime if target == "gpu":
                return input.load[width](idx) + 2
            return input.load[width](idx) + 1

        foreach[target=target](add_one, output, ctx)
        comptime if target == "cpu":
            output[0, 0] = input[0, 0] + 1
