"""A worker process connected by a socketpair (multiprocessing.Pipe) stops (SIGSTOP) before
it answers: the parent blocks reading an AF_UNIX socket whose peer is the stopped child
(this was once blamed on the network)."""
import multiprocessing
import os
import signal

from trainbridge import worker
from _common import say


def loader_worker(conn):
    os.kill(os.getpid(), signal.SIGSTOP)
    conn.send("batch")


def next_batch(conn):
    return conn.recv()


if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    with worker.stage("data"):
        parent_end, child_end = ctx.Pipe()  # duplex: a socketpair
        proc = ctx.Process(target=loader_worker, args=(child_end,), name="loader-worker")
        proc.start()
        say(f"waiting for a batch from pid {proc.pid}")
        next_batch(parent_end)
