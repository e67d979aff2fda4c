# An unmodified script with a tqdm bar (no torch).
import sys
import time

from tqdm import tqdm

total = int(sys.argv[1]) if len(sys.argv) > 1 else 50
for _ in tqdm(range(total), desc="shard-00042.tar", unit="B", mininterval=0.02):
    time.sleep(0.002)
print("bar done")
