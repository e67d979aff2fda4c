"""A simulated CUDA out-of-memory error: torch's class name and message, no torch needed."""
from trainbridge import worker
from _common import say


class OutOfMemoryError(RuntimeError):
    pass


OutOfMemoryError.__module__ = "torch.cuda"


def forward():
    say("forward pass with batch 512")
    raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB "
                           "total capacity; 14.90 GiB already allocated)")


with worker.stage("train"):
    worker.progress(1, 100)
    forward()
