"""A torch DataLoader with three workers; worker 2 stops (SIGSTOP) in __getitem__ before its
first batch, so the training loop waits for it forever (the diagnosis must
name "DataLoader worker 2" and say it is stopped). torch is imported before the worker (and
the row runs without zero-code mode) so the slow import counts against the startup timeout,
not the stall timeout."""
import os
import signal

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from trainbridge import worker
from _common import say


class Numbers(Dataset):
    def __len__(self):
        return 30

    def __getitem__(self, i):
        if get_worker_info().id == 2:
            os.kill(os.getpid(), signal.SIGSTOP)
        return torch.tensor([i])


def train():
    loader = DataLoader(Numbers(), batch_size=1, num_workers=3)
    for batch in loader:
        say(f"batch {int(batch[0][0])}")


if __name__ == "__main__":
    with worker.stage("train"):
        train()
