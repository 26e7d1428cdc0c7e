# Allocating far more than the GPU holds, as a batch size typed one digit too long does.
import torch

x = torch.empty(1 << 40, dtype=torch.float32, device="cuda")
print(x.shape)
