"""A non-main thread dies of an exception; the main thread carries on and ends normally."""
import threading

from trainbridge import worker
from _common import say


def thread_body():
    raise KeyError("thread lost its key")


with worker.stage("data"):
    t = threading.Thread(target=thread_body, name="loader-thread")
    t.start()
    t.join()
    worker.progress(1, 1)
say("main thread done")
