"""os._exit(7) right after printing without a newline: no last words, output not lost."""
import os
import sys

from trainbridge import worker
from _common import wait_for_go


def leave():
    sys.stdout.write("partial line without newline")
    sys.stdout.flush()
    os._exit(7)


with worker.stage("train"):
    worker.progress(1, 10)
    wait_for_go()
    leave()
