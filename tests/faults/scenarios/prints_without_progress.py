"""An unmodified script (zero-code mode) that trains by hand: no optimizer, no tqdm, no
worker calls, only a line printed every half second for longer than the stall timeout
(word_language_model was once declared hung; its output is its activity)."""
import time

for step in range(10):
    print(f"| epoch 1 | {step:3d}/10 batches | loss {6.0 - step * 0.1:.2f}", flush=True)
    time.sleep(0.5)  # the work between two log lines
print("done", flush=True)
