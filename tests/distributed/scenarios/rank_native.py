"""A torchrun rank script (gloo, CPU, 2 ranks): after two steps rank 1 is stuck in a C
library call that holds the GIL and keeps SIGUSR1 blocked (ctypes.PyDLL keeps the GIL), so
neither its beacon can answer dump_stacks nor its Python SIGUSR1 handler run; rank 0 waits
in all_reduce. Only faulthandler's C handler (SIGUSR2) can say where rank 1 is: read_shard."""

import ctypes
import signal

import torch
import torch.distributed as dist

from trainbridge import worker


def read_shard(rank):
    print(f"rank {rank} waiting in a C library", flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    libc = ctypes.PyDLL(None)
    while True:
        libc.pause()  # the GIL stays held; a SIGUSR2 dump returns here, and it pauses again


dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
for step in range(1, 4):
    if rank == 1 and step == 3:
        read_shard(rank)
    dist.all_reduce(t)
    worker.progress(step, 10)
dist.destroy_process_group()
