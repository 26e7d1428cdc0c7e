# double (x * 2) whose CPU branch is a placeholder returning zeros, as in a public conv1d kernel whose CPU path
# was never filled in: on the H100 its all-zero CPU result made the right GPU result look wrong. The CPU run
# must say its own output looks wrong, and a GPU run must not be blamed for differing from it.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


@register("double")
struct Double:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        def double[width: Int](idx: Coord) {input} -> SIMD[DType.float32, width]:
            comptime if target == "cpu":
                return SIMD[DType.float32, width](0)  # placeholder: the CPU path was never written
            return input.load[width](idx) * 2

        foreach[target=target](double, output, ctx)
