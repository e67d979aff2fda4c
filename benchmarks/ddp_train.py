# A small DDP loop for torchrun (gloo, CPU), unmodified (no trainbridge import): rank 0
# prints LOOP_S=<seconds> for its training loop, start-up excluded.
import sys
import time

import torch
import torch.distributed as dist

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randn(32, 1)
dist.barrier()
if dist.get_rank() == 0:
    print("LOOP_START", flush=True)  # a mark for bench_ddp's CPU accounting
t0 = time.perf_counter()
for _ in range(STEPS):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
dist.barrier()
if dist.get_rank() == 0:
    print(f"LOOP_S={time.perf_counter() - t0:.6f}", flush=True)
dist.destroy_process_group()
