"""A Slurm job's I/O (docs/SCALE.md): the runner, the keeper's follower, and Slurm's commands.
The rules they apply are bridge/slurm.py's (pure).

    sched = bridge.Scheduler(store="~/jobs.db", backend="slurm",
                             slurm={"listen": "10.0.0.1", "partition": "gpu"})
    job_id = sched.submit(["srun", "torchrun", ...], slurm={"nodes": 2, "time": "2:00:00"})

The store, the keeper and the judge stay on the submitting host; Slurm runs the job's
processes. For a job submitted with Slurm options the keeper launches this module as the
job's command ("the runner", a launcher like torchrun, with its own worker), listening on
`listen` (an address of this host the nodes reach) as a CurveZMQ server. The runner:

- submits the command with `sbatch` (its arguments, never a shell string), in the job's
  environment with the ranks' TRAINBRIDGE_* variables (the job's endpoint and keys: in the
  environment only, never in argv or a file), so every Python process of the job on every
  node says hello to the keeper over tcp, authenticated, as torchrun's ranks of other hosts do;
- says where Slurm has the job: a stage "queued in Slurm: <reason>" while it is PENDING,
  a log line when it runs and on which nodes;
- copies the job's output (sbatch --output, in the job's directory: a filesystem the nodes
  share with this host) to its own stdout, so the keeper's log and feed have it;
- on SIGTERM (a cancel) has Slurm signal the job (`scancel --signal=TERM --full`), and after
  the grace ends it (`scancel`); it ends when Slurm says the job ended;
- writes what Slurm said at the end to <dir>/slurm.json (its job id first, at once), which
  the keeper reads for the verdict (end_verdict) and reconcile for a job left behind.

Slurm's own ends (TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, ...) are verdicts of their
own: end_verdict turns the runner's report into the job's, naming the state, the nodes and
where the job was. bridge/slurm.py's end_verdict is that verdict.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from trainbridge.bridge.signal_thread import SignalThread
from trainbridge.bridge.slurm import (
    OUTPUT_PATTERN,
    QUEUED,
    RUNNING,
    ended,
    facts_of,
    parse_show_job,
    sbatch_argv,
)

MODULE = "trainbridge.bridge.slurm_runner"
FACTS_FILE = "slurm.json"  # in the job's directory: what Slurm said (see end_verdict)
SCRIPT_FILE = "slurm.sh"  # the batch script: exec "$@" (the command is its arguments)
SCRIPT = '#!/bin/sh\n# trainbridge: the command is this script\'s arguments\nexec "$@"\n'
POLL_S = 1.0  # how often the runner asks Slurm about its job
COPY_CHUNK = 1 << 20  # the job's output is copied to the keeper in reads of this size
CANCEL_GRACE_S = 10.0  # SIGTERM to the job's processes, then scancel
REMOTE_ENV = "TRAINBRIDGE_REMOTE_ENV"  # bridge/job.py launch(listen=...)


class Unreachable(Exception):
    """Slurm's controller did not answer (it restarts, the network): nothing is known."""


def show_job(job_id: str, timeout: float = 10.0) -> Optional[dict[str, Any]]:
    """What Slurm says of a job now, or None when it does not know it (any more: MinJobAge
    after its end). Raises Unreachable when the controller does not answer."""
    try:
        done = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unreachable(str(exc)) from None
    if done.returncode != 0 and "invalid job id" not in done.stderr.lower():
        raise Unreachable(done.stderr.strip() or f"scontrol exit {done.returncode}")
    if done.returncode != 0 or "JobState=" not in done.stdout:
        return None
    facts = facts_of(parse_show_job(done.stdout))
    facts["job_id"] = job_id
    return facts


def down_nodes(nodes: Optional[str]) -> list[str]:
    """Those of `nodes` (a Slurm host list) that Slurm says are down or failing now."""
    if not nodes:
        return []
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-N", "-n", nodes, "-o", "%N %T"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    out = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and re.match(r"(down|fail|drain|not_responding)", parts[1].lower()):
            out.append(parts[0])
    return sorted(set(out))


def hostnames(nodes: Optional[str]) -> list[str]:
    """A Slurm host list (tbh[1-2]) as its names, in Slurm's order."""
    if not nodes:
        return []
    try:
        done = subprocess.run(
            ["scontrol", "show", "hostnames", nodes], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return done.stdout.split() if done.returncode == 0 else []


def scancel(job_id: str, *options: str) -> Optional[str]:
    """scancel; None when it worked, else what it said."""
    try:
        done = subprocess.run(
            ["scancel", *options, job_id], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def read_facts(job_dir: str) -> Optional[dict[str, Any]]:
    try:
        with open(os.path.join(job_dir, FACTS_FILE), encoding="ascii") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_facts(job_dir: str, facts: Mapping[str, Any]) -> None:
    path = os.path.join(job_dir, FACTS_FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        json.dump(facts, f)
    os.replace(tmp, path)  # whole or not at all: the keeper and reconcile read it any time


def end_leftover(job_dir: str) -> Optional[str]:
    """A job whose keeper or runner is gone: scancel its Slurm job if Slurm still runs it.
    Returns what was done, in words, or None."""
    facts = read_facts(job_dir)
    if not facts or not facts.get("job_id"):
        return None
    try:
        now = show_job(str(facts["job_id"]))
    except Unreachable as exc:
        now = {"state": "UNKNOWN"}  # scancel anyway: it may still run
        said = f"Slurm's controller did not answer ({exc}); "
    else:
        said = ""
        if now is None or ended(now["state"]):
            return None
    problem = scancel(str(facts["job_id"]))
    return said + (
        f"Slurm job {facts['job_id']} cancelled (scancel)"
        if problem is None
        else f"scancel {facts['job_id']} failed: {problem}"
    )


# --- the runner (the job's launched process) --------------------------------------------------
class Runner:
    def __init__(self, job_dir: str, options: dict[str, Any], command: list[str]):
        self.dir = job_dir
        self.options = options
        self.command = command
        self.job_id: Optional[str] = None
        self.cancelled = threading.Event()
        self.facts: dict[str, Any] = {}
        self._out_path: Optional[str] = None
        self._out_pos = 0
        self._cancel_at: Optional[float] = None  # when the cancel's scancel --signal=TERM went
        self._stage: Optional[Any] = None  # the open "queued in Slurm: ..." stage
        self._said_running = False

    def env(self) -> dict[str, str]:
        """The job's environment for sbatch: this process's, its own worker's variables
        replaced by the ranks' (REMOTE_ENV)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINBRIDGE_")}
        env.update(json.loads(os.environ.get(REMOTE_ENV) or "{}"))
        return env

    def submit(self) -> str:
        script = os.path.join(self.dir, SCRIPT_FILE)
        with open(script, "w", encoding="ascii") as f:
            f.write(SCRIPT)
        os.chmod(script, 0o700)
        name = os.environ.get("TRAINBRIDGE_JOB_ID") or os.path.basename(self.dir)
        argv = sbatch_argv(self.options, self.dir, name) + [script] + self.command
        try:
            done = subprocess.run(argv, capture_output=True, text=True, env=self.env(), timeout=60)
        except FileNotFoundError:
            raise SystemExit(
                "trainbridge: sbatch is not on PATH: this host cannot submit to Slurm (run "
                "the scheduler on a login node of the cluster, or install Slurm's client)"
            ) from None
        except subprocess.TimeoutExpired:
            raise SystemExit("trainbridge: sbatch did not answer within 60 s") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()
            raise SystemExit(
                f"trainbridge: sbatch refused the job (exit {done.returncode}): {said}. "
                f"The command was: {shlex.join(argv)}"
            )
        return done.stdout.strip().split(";")[0]

    def copy_output(self) -> None:
        if self._out_path is None:
            self._out_path = os.path.join(self.dir, OUTPUT_PATTERN.replace("%j", str(self.job_id)))
        try:
            with open(self._out_path, "rb") as f:
                f.seek(self._out_pos)
                while True:  # in bounded reads: a flood since the last poll is not one buffer
                    data = f.read(COPY_CHUNK)
                    if not data:
                        break
                    self._out_pos += len(data)
                    sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except FileNotFoundError:
            return  # not there yet (the job has not started), or not on this host (below)

    def run(self) -> int:
        """Submit, follow the Slurm job until it ends (its state to the keeper, its output
        to stdout, a cancel to scancel), and return its exit status."""
        # Off the handler (an Event's lock in a handler can deadlock on a second signal).
        SignalThread(lambda signum: self.cancelled.set(), "trainbridge-slurm-signals").install(
            (signal.SIGTERM, signal.SIGINT)
        )
        self.job_id = self.submit()
        self.facts = {"job_id": self.job_id, "state": "PENDING"}
        write_facts(self.dir, self.facts)
        print(f"trainbridge: submitted to Slurm as job {self.job_id}", flush=True)
        missing = 0
        unreachable = False
        while True:
            self._cancel_step()
            try:
                now = show_job(self.job_id)
            except Unreachable as exc:  # not a verdict: the job may run on; ask again
                if not unreachable:
                    print(f"trainbridge: Slurm's controller does not answer ({exc}); "
                          "asking again every second", flush=True)  # fmt: skip
                unreachable = True
                self.cancelled.wait(POLL_S)
                continue
            if unreachable:
                print("trainbridge: Slurm's controller answers again", flush=True)
                unreachable = False
            if now is None:
                missing += 1
                if missing >= 30:  # forgotten by Slurm (MinJobAge) before it was seen ending
                    self.facts.update(state="UNKNOWN")
                    break
            else:
                missing = 0
                self._seen(now)
                if ended(now["state"]):
                    break
            self.cancelled.wait(POLL_S)
        self._queued_stage(None)
        return self._finish()

    def _cancel_step(self) -> None:
        """A cancel asked: scancel --signal=TERM at once, a plain scancel after the grace."""
        if self.cancelled.is_set() and self._cancel_at is None:
            self._cancel_at = time.monotonic()
            print(f"trainbridge: cancel: scancel --signal=TERM {self.job_id}", flush=True)
            self.facts["cancelled_here"] = True  # Slurm's CANCELLED is this cancel's
            scancel(str(self.job_id), "--signal=TERM", "--full")
        grace = float(self.options.get("grace", CANCEL_GRACE_S))
        if self._cancel_at is not None and time.monotonic() - self._cancel_at > grace:
            print(f"trainbridge: cancel: scancel {self.job_id} (after {grace:g} s)", flush=True)
            scancel(str(self.job_id))
            self._cancel_at = float("inf")

    def _queued_stage(self, name: Optional[str]) -> None:
        """The open stage says why Slurm keeps the job queued (name), or none is open."""
        if self._stage is not None and (name is None or self._stage.name != name):
            self._stage.__exit__(None, None, None)
            self._stage = None
        if name is not None and self._stage is None:
            from trainbridge import worker

            self._stage = worker.stage(name)
            self._stage.__enter__()

    def _seen(self, now: dict[str, Any]) -> None:
        """What Slurm says of the job now: its queue reason as a stage, where it runs, its
        failed nodes, its facts for the keeper (written when the state changed), its output."""
        queued = now["state"] in QUEUED
        self._queued_stage(f"queued in Slurm: {now['reason'] or now['state']}" if queued else None)
        if now["state"] in RUNNING and not self._said_running:
            self._said_running = True
            self.facts["hosts"] = hostnames(now["nodes"])
            print(f"trainbridge: Slurm job {self.job_id} runs on {now['nodes']}", flush=True)
        if now["state"] == "NODE_FAIL" or (
            now["state"] in RUNNING and now.get("reason") == "NodeDown"
        ):
            now["failed_nodes"] = down_nodes(now["nodes"])
        changed = (now["state"], now["reason"]) != (
            self.facts.get("state"),
            self.facts.get("reason"),
        )
        self.facts.update(now)
        if changed:  # the keeper follows it (Follow): queued or not
            write_facts(self.dir, self.facts)
        self.copy_output()

    def _finish(self) -> int:
        """The job ended in Slurm: the rest of its output, its last facts, its exit status."""
        self.copy_output()
        if self._out_pos == 0 and self._out_path and not os.path.exists(self._out_path):
            # Slurm wrote it on the node that ran the batch script: without a filesystem
            # shared with this host its lines are there only. Said, not lost silently.
            self.facts["output_elsewhere"] = self._out_path
            print(
                f"trainbridge: the job's output ({self._out_path}) is not on this host: Slurm "
                f"wrote it on {self.facts.get('batch_host') or 'the first node'} (no shared "
                "filesystem?); its messages, errors and stacks came over the network",
                flush=True,
            )
        if self.facts.get("state") == "NODE_FAIL" and not self.facts.get("failed_nodes"):
            self.facts["failed_nodes"] = down_nodes(self.facts.get("nodes"))
        write_facts(self.dir, self.facts)
        print(f"trainbridge: Slurm job {self.job_id} ended: {self.facts.get('state')}", flush=True)
        if self.facts.get("state") == "COMPLETED":
            return 0
        code = self.facts.get("exit_code")
        return code if code else 1


class Follow(threading.Thread):
    """The keeper's side of a Slurm job (bridge/keeper.py): while Slurm keeps the job queued
    (the runner's facts file says so), the Job is held (Job.hold: no start-up or stall
    deadline runs) and the row's note says why; released when Slurm runs it."""

    def __init__(self, job_dir: str, job: Any, note: Any, every: float = POLL_S):
        super().__init__(name="trainbridge-keeper-slurm", daemon=True)
        self.dir, self.job, self.note, self.every = job_dir, job, note, every
        self.stop = threading.Event()

    def run(self) -> None:
        held: Optional[bool] = None
        said: Optional[str] = None
        while not self.stop.is_set() and not self.job.done():
            facts = read_facts(self.dir) or {}
            state = facts.get("state")
            now_held = state in QUEUED if state else held
            if now_held is not None and now_held != held:
                held = now_held
                self.job.hold(held)
            text = f"queued in Slurm: {facts.get('reason') or state}" if held else None
            if text != said:
                said = text
                self.note(text)
            self.stop.wait(self.every)
        if said is not None:
            self.note(None)  # ended while queued (a cancel): the queue's note goes with it


def runner_command(
    python: str,
    job_dir: str,
    options: Mapping[str, Any],
    command: Sequence[str],
    kill_grace: Optional[float] = None,
) -> list[str]:
    """The job's command for its keeper: the runner. kill_grace: the job's SIGTERM -> SIGKILL
    grace; the runner has Slurm end the job (scancel) within it."""
    given = dict(options)
    if kill_grace is not None:
        given["grace"] = max(1.0, min(CANCEL_GRACE_S, kill_grace - 1.5))
    return [python, "-m", MODULE, job_dir, json.dumps(given), "--", *command]


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4 or args[2] != "--":
        print(f"usage: python -m {MODULE} JOB_DIR OPTIONS_JSON -- COMMAND...", file=sys.stderr)
        return 2
    return Runner(args[0], json.loads(args[1]), args[3:]).run()


if __name__ == "__main__":
    sys.exit(main())
