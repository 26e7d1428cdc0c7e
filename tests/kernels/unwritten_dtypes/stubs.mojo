# Ops that never write their output (a deliberate bug: the body was left for later), one per output dtype that
# the unwritten-output check must cover: float32, int32, uint8 and bool.
from extensibility import register, InputTensor, OutputTensor
from max.gpu.host import DeviceContext


@register("stub_float")
struct StubFloat:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        pass  # TODO


@register("stub_int")
struct StubInt:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.int32, rank=2, ...],
        input: InputTensor[dtype = DType.int32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        pass  # TODO


@register("stub_uint8")
struct StubUint8:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.uint8, rank=2, ...],
        input: InputTensor[dtype = DType.uint8, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        pass  # TODO


@register("stub_bool")
struct StubBool:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.bool, rank=2, ...],
        input: InputTensor[dtype = DType.int32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        pass  # TODO
