# An unmodified script that trains without an optimizer, as pytorch/examples'
# word_language_model does: loss.backward(), then p.data.add_(p.grad, alpha=-lr). It never
# reports progress and prints only at the end: the backward() calls are the evidence it trains.
import sys
import time

import torch

torch.manual_seed(0)
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 6.0
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64))
x, y = torch.randn(256, 64), torch.randn(256, 64)
lr, steps = 1e-3, 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    model.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    steps += 1
print(f"trained {steps} steps by hand, loss {loss.item():.4f}")
