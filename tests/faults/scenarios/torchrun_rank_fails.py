"""A torchrun rank script (gloo, CPU, 2 ranks): rank 1 fails reading its shard while rank 0
waits for it in all_reduce. The root cause is rank 1's ValueError; rank 0's lost peer (or
its SIGTERM from the agent) is a consequence."""
import torch
import torch.distributed as dist

from trainbridge import worker


def load_shard(rank):
    raise ValueError(f"shard {2 * rank + 1} is corrupt")


dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
dist.all_reduce(t)  # both ranks are up
if rank == 1:
    with worker.stage("data"):
        load_shard(rank)
with worker.stage("train"):
    dist.all_reduce(t)  # rank 0 waits here for rank 1, which never comes
dist.destroy_process_group()
