# Run as `python -m trainpkg`: an unmodified package entry point with a tqdm bar.
from tqdm import tqdm

for _ in tqdm(range(20), desc="pkg", mininterval=0):
    pass
print("module done")
