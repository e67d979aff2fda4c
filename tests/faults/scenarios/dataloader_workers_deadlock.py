"""A torch DataLoader with four forked workers that all deadlock: the dataset takes a lock
that a thread of the main process (a metrics uploader) held when the workers were forked,
so in every worker it is held by a thread that does not exist there. The training loop waits
for its first batch forever; the diagnosis must say that all 4 workers are blocked on the same
wait, and where in Python (Numbers.__getitem__)."""
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

from trainbridge import worker
from _common import say

CACHE_LOCK = threading.Lock()


def upload_metrics(held):
    with CACHE_LOCK:  # held across a slow upload
        held.set()
        time.sleep(3600)


class Numbers(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        with CACHE_LOCK:
            return torch.tensor([i])


def train():
    loader = DataLoader(Numbers(), batch_size=4, num_workers=4)
    for batch in loader:
        say(f"batch {int(batch[0][0])}")


if __name__ == "__main__":
    held = threading.Event()
    threading.Thread(target=upload_metrics, args=(held,), name="uploader", daemon=True).start()
    held.wait()
    say("loading the first batch")
    with worker.stage("train"):
        train()
