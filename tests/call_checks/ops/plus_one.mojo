# Correct ops for the call checks (tests/test_call_checks.py): the mistakes are the calls', never the ops'.
# plus_one: output = input + 1 (float32, rank 2); its foreach runs over the output and reads the input at the same
# index, so an input smaller than the output is read past its end.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


@register("plus_one")
struct PlusOne:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        def plus_one[width: Int](idx: Coord) {input} -> SIMD[DType.float32, width]:
            return input.load[width](idx) + 1

        foreach[target=target](plus_one, output, ctx)


# times: output = input * factor, where factor has no default: a call must give it, ops.times[{"factor": 3}].
@register("times")
struct Times:
    @staticmethod
    def execute[
        target: StaticString,
        factor: Int,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        def times[width: Int](idx: Coord) {input} -> SIMD[DType.float32, width]:
            return input.load[width](idx) * Float32(factor)

        foreach[target=target](times, output, ctx)


# refuses: raises whenever it runs — a call that matches its declaration and still fails inside MAX.
@register("refuses")
struct Refuses:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        raise Error("refuses: this op always fails")
