"""A torch DataLoader worker dies of SIGKILL (as the OOM killer does) while the training loop
waits for its batch; torch then raises in the main process (the hint once said
"fix the error raised at" the training loop, not that a worker was killed).

It waits for the client to hear its stage (matrix.json go_when) before the DataLoader starts:
torch's SIGCHLD handler raises in the main thread wherever it is, and when that is inside
importlib's lock code (an import in multiprocessing) CPython can leave the import lock held,
so a beacon thread still importing its own modules never says hello (seen 1 in 6 runs under
load). docs/WORKER.md has the limitation; the row is about the verdict, not that race."""
import os
import signal

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from trainbridge import worker
from _common import wait_for_go


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
        wait_for_go()
        train()
