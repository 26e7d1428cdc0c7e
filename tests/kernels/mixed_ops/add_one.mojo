# A clean op beside one that indexes tensors from host code (copy_first.mojo): `--op add_one` is judged
# by add_one alone. output = input + 1, element by element.
# Element access happens only inside the `foreach` closure, which runs on the target device;
# host code never touches tensor memory (seed 000's crash on GPU came from doing exactly that).
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
