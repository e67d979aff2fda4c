"""Runs a scheduled job while the wall clock is set forward: `clock_step.py STORE STAT_COPY`,
run by tests/scheduler/test_process_identity.py in a private mount namespace of its own
(unshare --mount), where /proc/stat is STAT_COPY, bind-mounted over it. Every process below
this one (the keeper, the training process) reads that copy, and moving its btime is what
setting the clock does to /proc/stat (btime is the wall clock less the time since boot), as
NTP does at wake or a restored VM's agent does. The machine's own clock, which the tests
beside this one run on, is left alone.

Prints one JSON line: the row's state after the scheduler looked past the step, the keeper's
ping round trip then, and the job's end (outcome, note)."""

import json
import os
import subprocess
import sys

from trainbridge import bridge

HERE = os.path.dirname(os.path.abspath(__file__))
WAIT_S = 30
STEP_S = 5


def set_btime(path, moved):
    """Rewrite the copy in place (the bind mount holds its inode): btime moved by `moved` s."""
    with open(path, encoding="ascii") as f:
        lines = f.read().splitlines()
    lines = [
        f"btime {int(line.split()[1]) + moved}" if line.startswith("btime") else line
        for line in lines
    ]
    with open(path, "w", encoding="ascii") as f:
        f.write("\n".join(lines) + "\n")


def main(store, stat_copy):
    subprocess.run(["mount", "--bind", stat_copy, "/proc/stat"], check=True)
    s = bridge.Scheduler(store=store, slots={"jobs": 1, "gpus": []}, tick=None)
    try:
        job_id = s.submit([sys.executable, os.path.join(HERE, "child.py"), "echo"])
        job = s.attach(job_id)
        for event in job.events(timeout=WAIT_S):
            if event["event"] == "message" and event["kind"] == "hello":
                break
        else:
            raise SystemExit("the job never said hello")
        set_btime(stat_copy, STEP_S)  # the clock set 5 s forward
        s.tick()  # the scheduler looks at its keepers: one tick after the step, then another
        s.tick()
        state = s.get(job_id)["state"]
        try:
            rtt = job.ping()  # the keeper answers, and its worker
            job.send("stop")
        except Exception as exc:  # noqa: BLE001 - said in the line, the test fails on it
            rtt = f"{type(exc).__name__}: {exc}"
        report = job.wait(WAIT_S)
        print(
            json.dumps(
                {
                    "state_after_step": state,
                    "ping": rtt,
                    "outcome": report["outcome"],
                    "note": report.get("note"),
                }
            )
        )
    finally:
        s.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
