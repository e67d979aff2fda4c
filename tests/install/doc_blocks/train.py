"""The `train.py` the documentation's blocks run (tests/install/test_doc_blocks.py copies it
into each block's scratch directory): a few fast steps, stages and progress, no torch."""

import sys

from trainbridge import worker

with worker.stage("train"):
    for step in range(5):
        worker.progress(step + 1, total=5, loss=1.0 / (step + 1))
print("trained", " ".join(sys.argv[1:]))
