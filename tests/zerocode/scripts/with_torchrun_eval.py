# A training script that runs a one-process torchrun evaluation as one of its steps, then
# goes on training. The job is this script's: its stages and progress, not the eval rank's.
import os
import subprocess
import sys

from trainbridge import worker

TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")

with worker.stage("train"):
    for step in range(1, 4):
        worker.progress(step, total=6)
with worker.stage("eval"):
    subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node=1", "eval_rank.py"], check=True)
with worker.stage("train more"):
    for step in range(4, 7):
        worker.progress(step, total=6)
print("trained 6 steps", flush=True)
