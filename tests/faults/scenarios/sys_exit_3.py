"""sys.exit(3) from inside a stage."""
import sys

from trainbridge import worker
from _common import say


def finish():
    say("leaving with status 3")
    sys.exit(3)


with worker.stage("save"):
    finish()
