# An embedding lookup whose ids run one past the table: torch's device-side assert fires, and the
# error surfaces at the next line that synchronises, not at the lookup.
import torch

table = torch.randn(1000, 64, device="cuda")
ids = torch.arange(0, 1001, device="cuda")
emb = table[ids]
total = emb.sum(dim=1)
print("first", total[:4].tolist())
