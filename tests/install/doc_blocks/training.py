# Prepended (doc-test marker `with training.py`) to the Python blocks that use names a reader
# supplies: the loader, the step, the model, paths. Small and fast; no torch.
import logging
import queue as _queue

steps = 3
step = 0
path = ckpt = "checkpoint.pt"
queue: _queue.Queue = _queue.Queue()
exc = RuntimeError("a caught, non-fatal error")


def make_loader():
    return [[1.0, 2.0], [3.0, 4.0]]


def train_step(batch=None):
    return 0.5


def load():
    return "model"


logging.basicConfig(level=logging.INFO)
