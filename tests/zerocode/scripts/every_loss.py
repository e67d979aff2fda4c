# An unmodified training loop that prints each step's loss (the test compares them with the
# curve zero-code sends): no worker, no tqdm, nothing but torch.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(1, 301):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    print(f"{step} {loss.item():.6f}")
