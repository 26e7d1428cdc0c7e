# A two-stage pipeline on two side streams (torch.cuda.Stream()): the encoder (16 fp32 4096x4096 matmuls, ~60 ms)
# runs on one, the head on the other, with no head_stream.wait_stream(encoder_stream) (nor record_stream): the head
# reads the features while the encoder is still computing them, and the program's check against the same pipeline
# run plainly fails. With CUDA_LAUNCH_BLOCKING=1 each launch finishes before the next and it passes;
# TORCH_CUDA_SANITIZER=1 reports the race. (Read on the default stream instead, the result came out right on an
# H100 and an H200 with torch 2.11: the legacy default stream waited for the side stream.)
import torch

torch.manual_seed(0)
w = torch.randn(4096, 4096, device="cuda") / 64
x = torch.randn(4096, 4096, device="cuda")


def encode(h, layers=16):
    for _ in range(layers):
        h = torch.tanh(h @ w)
    return h


def head(features):
    return features.sum(dim=1)


reference = head(encode(x))
torch.cuda.synchronize()

encoder_stream = torch.cuda.Stream()
head_stream = torch.cuda.Stream()
with torch.cuda.stream(encoder_stream):
    features = encode(x)
with torch.cuda.stream(head_stream):
    # missing: head_stream.wait_stream(encoder_stream)
    logits = head(features)
torch.cuda.synchronize()
diff = (logits - reference).abs().max().item()
assert diff < 1e-3, f"pipelined output differs from the plain one by {diff}"
print("pipeline outputs agree")
