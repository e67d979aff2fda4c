# An unmodified training script: it never imports worker.
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(96, 8), torch.randn(96, 1))
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
steps = 0
for _epoch in range(2):
    for x, y in DataLoader(data, batch_size=8, num_workers=int(sys.argv[1]) if len(sys.argv) > 1 else 0):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
print(f"trained {steps} steps, loss {loss.item():.4f}")
