# Stands in for a heavy library whose import hangs (a network call at import, say).
import time

print("importing transformers...", flush=True)
while True:
    time.sleep(3600)
