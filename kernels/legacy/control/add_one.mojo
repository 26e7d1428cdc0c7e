# Control kernel for the MAX generation before Mojo 1.x (25.x-26.1, as in the seed reports):
# `compiler.register`, `tensor`, `runtime.asyncrt`, `fn`. output = input + 1 inside `foreach`.
import compiler
from runtime.asyncrt import DeviceContextPtr
from tensor import InputTensor, OutputTensor, foreach
from utils.index import IndexList


@compiler.register("add_one")
struct AddOne:
    @staticmethod
    fn execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2],
        input: InputTensor[dtype = DType.float32, rank=2],
        ctx: DeviceContextPtr,
    ) raises:
        @parameter
        @always_inline
        fn add_one[width: Int](idx: IndexList[input.rank]) -> SIMD[DType.float32, width]:
            return input.load[width](idx) + 1

        foreach[add_one, target=target](output, ctx)
