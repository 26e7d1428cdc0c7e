# add_one, and on the CPU only, a first element written again from host code — under `target.startswith("cpu")`,
# a test of the device the static scan does not recognise.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


@register("add_one_logged")
struct AddOneLogged:
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
        comptime if target.startswith("cpu"):
            output[0, 0] = input[0, 0] + 1
