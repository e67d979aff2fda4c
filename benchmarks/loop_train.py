"""The demo's model (examples/demo_train.py) trained for a fixed number of steps, with no
sleeps, timing only the loop: `python loop_train.py STEPS [--api]`. With --api it calls
worker.progress every step like the demo; without it the script is unmodified (zero-code)."""

import sys
import time

import torch

steps, api = int(sys.argv[1]), "--api" in sys.argv
if api:
    from trainbridge import worker
torch.manual_seed(0)
torch.set_num_threads(1)
x = torch.randn(4096, 32)
y = x @ torch.randn(32, 1) + 0.1 * torch.randn(4096, 1)
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True
)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = torch.nn.MSELoss()
step = 0
started = time.perf_counter()
while step < steps:
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        step += 1
        if api:
            worker.progress(step, steps, loss=loss.item())
        if step >= steps:
            break
print(f"LOOP_S={time.perf_counter() - started!r}", flush=True)
