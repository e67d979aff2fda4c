"""A training process for the scheduler tests: `child.py MODE [ARG]`. Each mode really does
what it says.

  steps N       N progress steps, 0.1 s apart, printing "step i"; then exits 0
  forever       progress every 0.1 s until killed
  exit CODE     a stage, then exits with CODE
  flaky FILE    fails (exit 3) unless FILE exists; creates it, so the next attempt succeeds
  gpus          prints CUDA_VISIBLE_DEVICES and exits 0
  die N SIG     N progress steps, 0.1 s apart, then kills itself with signal SIG
  told SIG      progress every 0.1 s until the client sends "die", then kills itself with
                signal SIG (a crash after the client has heard the stages and the steps)
  stall         one progress step, then sleeps in a loop (no more progress)
  echo          sends back (worker.send) every message it receives, until one says "stop"
  diverge N     N progress steps with a finite loss, 0.1 s apart, then a NaN loss at every
                next step, 0.1 s apart, until killed (a loss that diverged; stop_on_nan stops it)
  stray         105 of 200 steps in a stage "train", then a Python subprocess (supervised
                too) opens its own "train" and reports 1 of 1; then exits 0
  hold S        progress every 0.1 s; each "hold" the client sends makes the main thread hold
                the GIL for S seconds (libc sleep() called through ctypes.PyDLL, which keeps
                it), printing "holding the GIL" first; until the client sends "stop"
"""

import os
import sys
import time

from trainbridge import worker

mode = sys.argv[1]
arg = sys.argv[2] if len(sys.argv) > 2 else None

if mode == "steps":
    with worker.stage("train"):
        for i in range(1, int(arg) + 1):
            worker.progress(i, int(arg))
            print(f"step {i}", flush=True)
            time.sleep(0.1)
elif mode == "stray":
    import subprocess

    with worker.stage("train"):
        for i in range(1, 106):
            worker.progress(i, 200)
            time.sleep(0.005)
        stray = "from trainbridge import worker\nwith worker.stage('train'): worker.progress(1, 1)"
        subprocess.run([sys.executable, "-c", stray], check=True)
        print("the subprocess is done", flush=True)
elif mode == "echo":
    with worker.stage("serve"):
        while True:
            got = worker.receive(timeout=0.05)
            if got is None:
                continue
            worker.send({"echo": got})
            if got == "stop":
                break
elif mode == "forever":
    with worker.stage("train"):
        i = 0
        while True:
            i += 1
            worker.progress(i, None)
            print(f"step {i}", flush=True)
            time.sleep(0.1)
elif mode == "exit":
    with worker.stage("train"):
        print("failing on purpose", flush=True)
    sys.exit(int(arg))
elif mode == "flaky":
    if not os.path.exists(arg):
        open(arg, "w").close()
        print("first attempt fails", flush=True)
        sys.exit(3)
    print("second attempt succeeds", flush=True)
elif mode == "die":
    import signal

    n, sig = int(arg), sys.argv[3]
    with worker.stage("train"):
        for i in range(1, n + 1):
            worker.progress(i, n)
            print(f"step {i}", flush=True)
            time.sleep(0.1)
        os.kill(os.getpid(), getattr(signal, sig))
elif mode == "told":
    import signal

    with worker.stage("train"):
        i = 0
        while worker.receive(timeout=0.1) != "die":
            i += 1
            worker.progress(i, None)
            print(f"step {i}", flush=True)
        os.kill(os.getpid(), getattr(signal, arg))
elif mode == "stall":
    with worker.stage("train"):
        worker.progress(1, 100)
        print("step 1, then nothing", flush=True)
        while True:
            time.sleep(0.05)
elif mode == "diverge":
    with worker.stage("train"):
        i = 0
        while True:
            i += 1
            worker.progress(i, None, loss=1.0 / i if i <= int(arg) else float("nan"))
            time.sleep(0.1)
elif mode == "hold":
    import ctypes

    libc = ctypes.PyDLL(None)  # PyDLL: the call keeps the GIL (CDLL would release it)
    with worker.stage("train"):
        i = 0
        while (told := worker.receive(timeout=0.1)) != "stop":
            i += 1
            worker.progress(i, None)
            if told == "hold":
                print("holding the GIL", flush=True)
                libc.sleep(int(arg))
elif mode == "gpus":
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}", flush=True)
else:
    raise SystemExit(f"unknown mode {mode}")
