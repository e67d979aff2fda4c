"""A rank script for two hosts (gloo, CPU): after two steps local rank 1 of host B
(FAULT_HOST=B) is stuck reading its shard while every other rank waits in all_reduce."""

import os
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
stuck = os.environ.get("FAULT_HOST") == "B" and os.environ.get("LOCAL_RANK") == "1"
t = torch.ones(4)
for step in range(1, 4):
    if stuck and step == 3:
        read_shard(rank)
    dist.all_reduce(t)
    worker.progress(step, 10)
dist.destroy_process_group()
