# An unmodified script that computes for seconds with no progress, no backward() and no output:
# an evaluation pass through its own functions (nanoGPT's estimate_loss is one). Each phase
# keeps the CPU busy in one function for a phase's seconds, then the next function takes over,
# so the heartbeats see the main thread move (argv: seconds, phase seconds).
import sys
import time


def load_batch(seconds):
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 1
    return n


def forward(seconds):
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 2
    return n


def score(seconds):
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += 3
    return n


def evaluate(seconds, phase):
    end, done, phases = time.monotonic() + seconds, 0, (load_batch, forward, score)
    while time.monotonic() < end:
        phases[done % len(phases)](phase)
        done += 1
    return done


print("evaluating", flush=True)
print(f"evaluated in {evaluate(float(sys.argv[1]), float(sys.argv[2]))} phases")
