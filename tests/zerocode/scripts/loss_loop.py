# An unmodified training script like nanoGPT's: no tqdm, no worker; a OneCycleLR schedule
# that knows the run's length. It prints its own last loss so the test can compare.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = 120
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=steps)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(steps):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
print(f"last loss {loss.item():.6f}", flush=True)
