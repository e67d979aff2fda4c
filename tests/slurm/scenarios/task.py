"""One task of a Slurm job's step (srun), with its fault picked by the environment:

    SLURM_FAULT=raise   task SLURM_FAULT_RANK raises ValueError at step SLURM_FAULT_STEP
    SLURM_FAULT=loop    task SLURM_FAULT_RANK spins in Python (never reaches the barrier)
    TASK_STEPS=N        steps (default 5), TASK_STEP_S: seconds per step (default 0.2)
    TASK_SYNC=1         the tasks meet in torch.distributed (gloo) at each step: rank 0
                        hosts the store on MASTER_ADDR:MASTER_PORT

Its rank is Slurm's (SLURM_PROCID of SLURM_NTASKS). It reports with the worker's API, as a
script written for trainbridge does; the unmodified DDP script is tests/faults/scenarios."""

import os
import time

from trainbridge import worker

rank = int(os.environ.get("SLURM_PROCID", "0"))
world = int(os.environ.get("SLURM_NTASKS", "1"))
fault = os.environ.get("SLURM_FAULT", "")
fault_rank = int(os.environ.get("SLURM_FAULT_RANK", "1"))
fault_step = int(os.environ.get("SLURM_FAULT_STEP", "2"))
steps = int(os.environ.get("TASK_STEPS", "5"))
step_s = float(os.environ.get("TASK_STEP_S", "0.2"))
sync = os.environ.get("TASK_SYNC") == "1"


def compute_weights():
    x = 0
    while True:  # a rank lost in its own Python loop
        x += 1


def main():
    dist = None
    if sync:
        import torch.distributed as dist

        with worker.stage("rendezvous"):
            dist.init_process_group(
                "gloo",
                init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                rank=rank,
                world_size=world,
            )
    print(f"task {rank} of {world} on {os.environ.get('SLURMD_NODENAME')}", flush=True)
    with worker.stage("train"):
        for step in range(1, steps + 1):
            if rank == fault_rank and step == fault_step:
                if fault == "raise":
                    raise ValueError(f"bad batch at step {step} on task {rank}")
                if fault == "loop":
                    compute_weights()
            time.sleep(step_s)
            if dist is not None:
                import torch

                dist.all_reduce(torch.ones(1))
            worker.progress(step, steps, loss=1.0 / step)
    if dist is not None:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
