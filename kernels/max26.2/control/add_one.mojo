# Control kernel for MAX 26.2-26.3: the legacy API (`compiler.register`, `tensor`, `runtime.asyncrt`, `fn`),
# but tensor types take a `static_spec` parameter, left open with `...`. output = input + 1 in `foreach`.
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
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContextPtr,
    ) raises:
        @parameter
        @always_inline
        fn add_one[width: Int](idx: IndexList[input.rank]) -> SIMD[DType.float32, width]:
            return input.load[width](idx) + 1

        foreach[add_one, target=target](output, ctx)
