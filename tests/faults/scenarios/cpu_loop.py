"""An infinite CPU loop that never reports progress."""
from trainbridge import worker
from _common import say


def spin():
    say("spinning")
    x = 0
    while True:
        x += 1


with worker.stage("train"):
    worker.progress(0, 10)
    spin()
