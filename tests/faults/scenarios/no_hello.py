"""Hangs before importing anything of ours: the worker never says hello."""
import time

print("started, never importing the worker", flush=True)
time.sleep(3600)
