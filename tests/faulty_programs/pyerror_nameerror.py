# Trains a small model on the GPU with torch; the user's own logging function uses a name it never defined
# (`step_loss` for `loss`): a NameError in the program's own code after the GPU work went fine.
import torch


def log_progress(step, loss):
    print(f"step {step}: loss {step_loss:.4f}")  # noqa: F821 (the bug: meant `loss`)


model = torch.nn.Linear(256, 10).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(512, 256, device="cuda")
y = torch.randint(0, 10, (512,), device="cuda")
for step in range(20):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        log_progress(step, loss.item())
