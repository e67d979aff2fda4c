"""DDP training as the public tutorials write it (pytorch/examples' ddp-tutorial-series,
multigpu_torchrun.py: a Trainer over a DistributedDataParallel model and a DistributedSampler),
on CPU with gloo, 2 ranks under torchrun. It does not import trainbridge: the worker gets in by
zero-code mode, as for a user's unmodified script.

DDP_FAULT picks what goes wrong on rank 1 (DDP_FAULT_RANK, default 1; "B:1" is local rank 1 of the
host whose FAULT_HOST is B, for the two-host tests) once DDP_FAULT_STEP steps are done:
  stop  - the rank stops (SIGSTOP: a frozen container, a debugger); the others wait in backward()
  loop  - the rank spins in a Python loop (compute_weights); the others wait in backward()
  kill  - the rank is killed by SIGKILL (as the OOM killer does); the others lose their peer
  deadlock - the rank's DataLoader (2 workers, forked each epoch) gets its next epoch's workers
          forked while a metrics-uploader thread holds the dataset's cache lock: in every
          worker the lock is held by a thread that does not exist there, and they all wait on
          it; the rank waits for its batch, the others in backward()
unset: trains to the end."""
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

FAULT = os.environ.get("DDP_FAULT", "")
FAULT_RANK = os.environ.get("DDP_FAULT_RANK", "1")
FAULT_STEP = int(os.environ.get("DDP_FAULT_STEP", "3"))
STEPS = int(os.environ.get("DDP_STEPS", "40"))
CACHE_LOCK = threading.Lock()  # the dataset's cache (the deadlock fault)


def upload_metrics():
    """A metrics uploader that holds the cache lock across a slow upload."""
    with CACHE_LOCK:
        time.sleep(3600)


class Numbers(Dataset):
    def __init__(self, size):
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        with CACHE_LOCK:
            return self.data[i]


def compute_weights(step):
    """A Python loop that never ends (a bad convergence test, say)."""
    total = 0.0
    while True:
        total += step * 0.5


class Trainer:
    def __init__(self, model, loader, optimizer):
        self.rank = int(os.environ["LOCAL_RANK"])
        self.model = DDP(model)
        self.loader = loader
        self.optimizer = optimizer
        self.step = 0

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()

    def _faulty(self):
        if ":" in FAULT_RANK:
            host, local = FAULT_RANK.split(":")
            return os.environ.get("FAULT_HOST") == host and os.environ["LOCAL_RANK"] == local
        return dist.get_rank() == int(FAULT_RANK)

    def _fault(self):
        if not FAULT or self.step != FAULT_STEP or not self._faulty():
            return
        print(f"[rank {dist.get_rank()}] fault {FAULT} at step {self.step}", flush=True)
        if FAULT == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif FAULT == "loop":
            compute_weights(self.step)
        elif FAULT == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif FAULT == "deadlock":
            threading.Thread(target=upload_metrics, name="uploader", daemon=True).start()
            while not CACHE_LOCK.locked():
                time.sleep(0.01)

    def train(self, max_steps):
        epoch = 0
        while self.step < max_steps:
            self.loader.sampler.set_epoch(epoch)
            if FAULT == "deadlock" and CACHE_LOCK.locked():
                # the hang begins here, not at the fault's own line: the epoch it was armed in
                # trains on with the workers forked before it
                print(
                    f"[rank {dist.get_rank()}] epoch {epoch}: the DataLoader forks its workers "
                    "with the cache lock held",
                    flush=True,
                )
            for source, targets in self.loader:
                self._fault()
                self._run_batch(source, targets)
                self.step += 1
                if self.step % 10 == 0:
                    print(f"[rank {dist.get_rank()}] step {self.step}", flush=True)
                time.sleep(0.05)
                if self.step >= max_steps:
                    break
            epoch += 1
        self._fault()  # DDP_FAULT_STEP == max_steps: after the last step


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    data = Numbers(256)
    # Workers only for the deadlock fault: a fork per epoch, as the DataLoader does by default.
    workers = 2 if FAULT == "deadlock" else 0
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data), num_workers=workers)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    Trainer(model, loader, optimizer).train(STEPS)
    dist.destroy_process_group()
    print("done", flush=True)


if __name__ == "__main__":
    sys.exit(main())
