# An unmodified DDP script for torchrun --nproc_per_node=2 (gloo, CPU).
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(5):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.barrier()
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
