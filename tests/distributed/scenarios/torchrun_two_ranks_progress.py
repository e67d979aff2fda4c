"""A torchrun rank script (2 ranks, no process group): each rank opens its own "train" stage
and reports its own progress. Rank 0 (the lead) counts 1..20 of 20; after it is done, rank 1
reports 150 of 200 (so a face that took the last progress from anyone would show rank 1's).
The order is made with a file (argv[1]), not with time."""

import os
import sys
import time

from trainbridge import worker

rank = int(os.environ["RANK"])
flag = sys.argv[1]  # a path of the caller's: rank 0 creates it when it is done
with worker.stage("train"):
    if rank == 0:
        for i in range(1, 21):
            worker.progress(i, 20)
            time.sleep(0.05)
        time.sleep(0.5)  # the beacon sends progress at most 4 times a second: step 20 is out
        open(flag, "w").close()
        time.sleep(2.0)  # rank 1's progress arrives while the job still runs
    else:
        deadline = time.monotonic() + 60
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.02)
        worker.progress(150, 200)
        time.sleep(1.0)
print(f"rank {rank} done", flush=True)
