"""A rank script for two hosts (gloo, CPU): local rank 1 of host B (FAULT_HOST=B) fails
reading its shard while every other rank waits for it in all_reduce."""

import os

import torch
import torch.distributed as dist

from trainbridge import worker


def load_shard(rank):
    raise ValueError(f"shard {2 * rank + 1} is corrupt")


dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)  # every rank is up
if os.environ.get("FAULT_HOST") == "B" and os.environ.get("LOCAL_RANK") == "1":
    with worker.stage("data"):
        load_shard(rank)
with worker.stage("train"):
    dist.all_reduce(t)  # the others wait here for the failed rank
dist.destroy_process_group()
