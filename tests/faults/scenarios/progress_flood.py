"""One million progress events in a tight loop, then a normal end."""
from trainbridge import worker
from _common import say

TOTAL = 1_000_000

with worker.stage("train"):
    for step in range(1, TOTAL + 1):
        worker.progress(step, TOTAL)
say(f"flooded {TOTAL} progress events")
