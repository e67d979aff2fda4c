# An unmodified tqdm-only script (no torch, no worker): a download bar, then a bar whose
# set_postfix() shows the loss, with an inner bar of its own; the loss ends as NaN.
import time

from tqdm import tqdm

for _ in tqdm(range(20), desc="Downloading weights.bin", unit="B", mininterval=0.01):
    time.sleep(0.002)
bar = tqdm(range(30), desc="Fitting:", mininterval=0.01)
for i in bar:
    loss = 1.0 / (i + 1) if i < 29 else float("nan")
    bar.set_postfix(loss=loss, lr=3e-4, note="warm")
    for _ in tqdm(range(3), desc="batches", leave=False, mininterval=0.01):
        time.sleep(0.002)
print("fit done")
