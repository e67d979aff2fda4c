"""A torchrun rank script (gloo, CPU, 2 ranks): after two steps rank 1 is stuck reading its
shard while rank 0 waits for it in all_reduce. The hung rank is 1, at read_shard."""
import time

import torch
import torch.distributed as dist

from trainbridge import worker


def read_shard(rank):
    print(f"rank {rank} reading its shard", flush=True)
    while True:  # a read that never returns (a dead NFS mount, say)
        time.sleep(3600)


dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
for step in range(1, 4):
    if rank == 1 and step == 3:
        read_shard(rank)
    dist.all_reduce(t)
    worker.progress(step, 10)
dist.destroy_process_group()
