"""The main thread sleeps forever inside a stage."""
import time

from trainbridge import worker
from _common import say


def wait_for_data():
    say("waiting for data")
    time.sleep(3600)


with worker.stage("data"):
    wait_for_data()
