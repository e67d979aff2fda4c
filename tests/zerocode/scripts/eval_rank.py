# The evaluation step of with_torchrun_eval.py: one torch.distributed rank (gloo, CPU),
# started by `torchrun --standalone --nproc_per_node=1`. Its hello says RANK 0, WORLD_SIZE 1.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
print(f"eval: world {dist.get_world_size()} sum {int(total.item())}", flush=True)
dist.destroy_process_group()
