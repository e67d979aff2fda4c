"""A DataLoader-like worker process stops (SIGSTOP) while the parent waits for its batch."""
import multiprocessing
import os
import signal

from trainbridge import worker
from _common import say


def loader_worker(queue):
    os.kill(os.getpid(), signal.SIGSTOP)
    queue.put("batch")


def next_batch(queue):
    return queue.get()


if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    with worker.stage("data"):
        queue = ctx.Queue()
        proc = ctx.Process(target=loader_worker, args=(queue,), name="loader-worker")
        proc.start()
        say(f"waiting for a batch from pid {proc.pid}")
        next_batch(queue)
