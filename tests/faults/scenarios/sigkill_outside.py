"""SIGKILL sent by another process (as a user or a scheduler would)."""
import os
import subprocess
import time

from trainbridge import worker
from _common import say, wait_for_go


def train_forever():
    say("training, then killed from outside")
    subprocess.run(["kill", "-KILL", str(os.getpid())])
    time.sleep(3600)  # the signal arrives before this ends


with worker.stage("train"):
    worker.progress(1, 100)
    wait_for_go()
    train_forever()
