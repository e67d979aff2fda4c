"""The script closes its own stdout and stderr, then fails: the error still arrives."""
import os

from trainbridge import worker
from _common import say


def after_close():
    raise RuntimeError("failed after closing stdout and stderr")


with worker.stage("train"):
    say("closing stdout and stderr")
    os.close(1)
    os.close(2)
    after_close()
