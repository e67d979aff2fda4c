"""A torch DataLoader worker dies of SIGKILL (as the OOM killer does) while the training loop
waits for its batch; torch then raises in the main process (issue 12 item 5: the hint said
"fix the error raised at" the training loop, not that a worker was killed)."""
import os
import signal

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from trainbridge import worker


class Numbers(Dataset):
    def __len__(self):
        return 30

    def __getitem__(self, i):
        if get_worker_info().id == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.tensor([i])


def train():
    loader = DataLoader(Numbers(), batch_size=1, num_workers=2)
    for batch in loader:
        # print here, not through _common.say: torch's SIGCHLD handler raises in whatever
        # Python frame the main thread is in, and the row names this one.
        print(f"batch {int(batch[0][0])}", flush=True)


if __name__ == "__main__":
    with worker.stage("train"):
        train()
