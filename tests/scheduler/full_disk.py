"""A job whose disk fills while it runs: `full_disk.py FOLDER GO_DIR [retry]` (FOLDER: an
empty small file system, test_store_failures.py mounts a tmpfs there in a private mount
namespace).

Submits a job to a store in FOLDER; once it runs, fills FOLDER to the last byte, then lets the
job print 500 lines and exit 0. With `retry`, the keeper's reserve is taken too (deleted,
its space filled): the keeper cannot write the end, and once it is seen backing off (its
main thread in clock_nanosleep), the filler is deleted. Prints one JSON object with what a
GUI would see: the attached report, the row, the feed's lines (each parsed, or the torn
one), the disk's free bytes at the end, Node's attached report, and whether the keeper and
the job's processes are gone."""

import errno
import json
import os
import subprocess
import sys
import time

from trainbridge import bridge
from trainbridge.bridge import procs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT_S = 30  # each wait; test_store_failures.py gives the whole 120 s
GO = "go"

# The job: wait for the go file (outside the full disk), then print and succeed.
JOB = (
    "import os, sys, time\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
    "for i in range(500): print('line', i, 'x' * 200)\n"
)

NODE_ATTACH = (
    "const { openStore } = require(process.argv[3] + '/node-client/src/index.js');"
    "(async () => { const store = openStore(process.argv[1], { python: process.argv[2] });"
    "const report = await store.attach(process.argv[4]).done;"
    "await store.close(); console.log(JSON.stringify(report)); })();"
)


def fill(folder: str) -> None:
    """Write zeros into FOLDER until the disk is full."""
    with open(os.path.join(folder, "fill"), "wb", buffering=0) as f:
        block = b"\0" * 4096
        try:
            while True:
                f.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    with open(os.path.join(folder, "fill2"), "wb", buffering=0) as f:
        try:  # the last partial block
            while True:
                f.write(b"\0" * 64)
        except OSError:
            pass


def backing_off(pid: int) -> bool:
    """Whether the keeper's main thread sleeps between two tries (clock_nanosleep, syscall
    230 on x86-64; before the job's end it waits on a futex), or it is gone (an old keeper
    died of the full disk: the test then sees it)."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()[0] == "230"
    except (OSError, IndexError):
        return True


def until(what, check):
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"full_disk.py: timed out waiting for {what}")
        time.sleep(0.05)


def main() -> None:
    folder, go_dir = sys.argv[1], sys.argv[2]
    go = os.path.join(go_dir, GO)
    path = os.path.join(folder, "jobs.db")
    s = bridge.Scheduler(store=path, slots={"jobs": 1, "gpus": []}, tick=None)
    job_id = s.submit([sys.executable, "-c", JOB, go])
    job = s.attach(job_id)
    until("the job to run", lambda: (s.get(job_id) or {}).get("state") == "running")
    row = s.get(job_id)
    retry = sys.argv[3:] == ["retry"]
    if retry and os.path.exists(os.path.join(row["dir"], "reserve")):
        os.unlink(os.path.join(row["dir"], "reserve"))  # procs.RESERVE_FILE
    fill(folder)
    full_before = os.statvfs(folder).f_bavail
    open(go, "w").close()
    if retry:
        until("the keeper to back off (or exit)", lambda: backing_off(row["keeper_pid"]))
        os.unlink(os.path.join(folder, "fill"))
    report = job.wait(WAIT_S)
    ended = s.get(job_id)
    node = subprocess.run(  # (its attach would wait for ever on a row that says running)
        ["node", "-e", NODE_ATTACH, path, sys.executable, ROOT, job_id] if report else ["true"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    until(
        "the keeper to exit",
        lambda: not procs.same_process(row["keeper_pid"], row["keeper_start"]),
    )
    lines = []
    with open(row["events_path"], "rb") as f:
        for line in f.read().split(b"\n")[:-1]:
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append({"torn": line[:200].decode("ascii", "replace")})
    with open(os.path.join(row["dir"], procs.KEEPER_LOG), "rb") as f:
        keeper_log = f.read().decode("ascii", "replace")
    print(
        json.dumps(
            {
                "report": report,
                "row": {k: ended[k] for k in ("state", "outcome", "exit_code")},
                "feed": [{k: e.get(k) for k in ("seq", "event", "torn")} for e in lines],
                "free_before": full_before,
                "free_after": os.statvfs(folder).f_bavail,
                "filler": os.path.exists(os.path.join(folder, "fill")),
                "node": node.stdout.strip(),
                "node_err": node.stderr[-2000:],
                "keeper_log": keeper_log[-3000:],
                "left": procs.processes_of(job_id),
            },
            default=str,
        )
    )
    s.close()


if __name__ == "__main__":
    try:
        main()
    finally:  # whatever failed, the job ends (it waits for this file)
        open(os.path.join(sys.argv[2], GO), "a").close()
