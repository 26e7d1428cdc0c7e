# Seed 000's kernel exactly as reported (MAX 26.1 syntax): compiler/tensor/runtime.asyncrt and `fn`.
import compiler
from runtime.asyncrt import DeviceContextPtr
from tensor import InputTensor, OutputTensor


@compiler.register("copy_first")
struct CopyFirst:
    @staticmethod
    fn execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2],
        input: InputTensor[dtype = DType.float32, rank=2],
        ctx: DeviceContextPtr,
    ) raises:
        output[0, 0] = input[0, 0]
