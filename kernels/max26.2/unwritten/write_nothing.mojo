# Layout-contract probe's op (max26.2 generation): writes nothing, so that what its output holds after a call
# shows whose buffer the op was handed: the caller's (its contents kept) or one MAX allocates and copies back.
import compiler
from runtime.asyncrt import DeviceContextPtr
from tensor import InputTensor, OutputTensor


@compiler.register("write_nothing")
struct WriteNothing:
    @staticmethod
    fn execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContextPtr,
    ) raises:
        pass  # deliberately: the output is never written
