# first_then_rest: a nested function with a multi-line signature, then host code that indexes a tensor after it —
# the scan must still see that line (seed 000's mistake after a correct closure).
import compiler
from runtime.asyncrt import DeviceContextPtr
from tensor import InputTensor, OutputTensor, foreach
from utils.index import IndexList


@compiler.register("first_then_rest")
struct FirstThenRest:
    @staticmethod
    fn execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2],
        input: InputTensor[dtype = DType.float32, rank=2],
        ctx: DeviceContextPtr,
    ) raises:
        @parameter
        fn same[
            width: Int
        ](idx: IndexList[input.rank]) -> SIMD[DType.float32, width]:
            return input.load[width](idx)

        foreach[same, target=target](output, ctx)
        output[0, 0] = input[0, 0]
