"""Jobs on a Slurm cluster (docs/SCALE.md): the options, the runner, and the Slurm end's verdict.

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
where the job was. Pure but for the runner (main) and the commands it runs.
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

MODULE = "trainbridge.bridge.slurm"
FACTS_FILE = "slurm.json"  # in the job's directory: what Slurm said (see end_verdict)
SCRIPT_FILE = "slurm.sh"  # the batch script: exec "$@" (the command is its arguments)
SCRIPT = '#!/bin/sh\n# trainbridge: the command is this script\'s arguments\nexec "$@"\n'
OUTPUT_PATTERN = "slurm-%j.out"  # sbatch --output, in the job's directory
POLL_S = 1.0  # how often the runner asks Slurm about its job
COPY_CHUNK = 1 << 20  # the job's output is copied to the keeper in reads of this size
CANCEL_GRACE_S = 10.0  # SIGTERM to the job's processes, then scancel
REMOTE_ENV = "TRAINBRIDGE_REMOTE_ENV"  # bridge/job.py launch(listen=...)

INT_OPTIONS = ("nodes", "ntasks_per_node", "cpus_per_task")
STR_OPTIONS = ("gres", "partition", "time", "listen", "account", "qos")
OPTIONS = INT_OPTIONS + STR_OPTIONS + ("sbatch",)

QUEUED = ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED")
RUNNING = ("RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING")
# Ends that are Slurm's verdict, not the job's own: what each says, and the job's outcome.
SLURM_ENDS = {
    "TIMEOUT": ("failed", "Slurm ended it at its time limit"),
    "NODE_FAIL": ("lost", "a node of its allocation failed"),
    "PREEMPTED": ("failed", "Slurm preempted it for another job"),
    "OUT_OF_MEMORY": ("crashed", "Slurm's memory limit ended it (OUT_OF_MEMORY)"),
    "BOOT_FAIL": ("failed", "a node of its allocation did not boot"),
    "DEADLINE": ("failed", "it passed its deadline"),
    # Not by this job's cancel (that one is judged as on one host): an scancel from outside.
    "CANCELLED": ("cancelled", "cancelled in Slurm (scancel, by a user or an administrator)"),
}


# --- options (pure) ---------------------------------------------------------------------------
def check_options(options: Any) -> dict[str, Any]:
    """A job's Slurm options, checked: ValueError in words for anything wrong."""
    if not isinstance(options, Mapping):
        raise ValueError(f"slurm options must be a dict, got {type(options).__name__}")
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown slurm options {unknown}; known: {sorted(OPTIONS)}")
    out: dict[str, Any] = {}
    for name in INT_OPTIONS:
        if options.get(name) is not None:
            value = options[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"slurm option {name} must be an int >= 1, got {value!r}")
            out[name] = value
    for name in STR_OPTIONS:
        if options.get(name) is not None:
            value = options[name]
            if name == "time" and isinstance(value, int) and not isinstance(value, bool):
                value = str(value)  # minutes, as sbatch reads a bare number
            if not isinstance(value, str) or not value or value.strip() != value:
                raise ValueError(f"slurm option {name} must be a non-empty string, got {value!r}")
            out[name] = value
    extra = options.get("sbatch") or []
    if isinstance(extra, (str, bytes)) or not all(
        isinstance(a, str) and a.startswith("-") for a in extra
    ):
        raise ValueError(
            f"slurm option sbatch must be a list of sbatch options (each '--name=value'), "
            f"got {extra!r}"
        )
    if extra:
        out["sbatch"] = list(extra)
    if "listen" not in out:
        raise ValueError(
            "slurm option listen is missing: give the address of this host that the cluster's "
            "nodes reach it by (e.g. slurm={'listen': '10.0.0.1'}; `ip -brief address` lists "
            "them); the job's processes connect back to it"
        )
    from trainbridge.bridge import remote

    try:
        remote.parse_listen(out["listen"])
    except ValueError as exc:
        raise ValueError(f"slurm option listen: {exc}") from None
    return out


def sbatch_argv(options: Mapping[str, Any], job_dir: str, name: str) -> list[str]:
    """sbatch's arguments for a job (the command follows as the script's arguments)."""
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={name}",
        f"--output={os.path.join(job_dir, OUTPUT_PATTERN)}",
        "--export=ALL",  # the environment sbatch runs in: the job's, with the ranks' keys
        "--kill-on-invalid-dep=yes",
    ]
    for option in INT_OPTIONS + ("gres", "partition", "time", "account", "qos"):
        if options.get(option) is not None:
            argv.append(f"--{option.replace('_', '-')}={options[option]}")
    return argv + list(options.get("sbatch") or [])


# --- what Slurm says (pure) -----------------------------------------------------------------
_FIELD = re.compile(r"(?:^|\s)([A-Za-z:]+)=(\S*)")


def parse_show_job(text: str) -> dict[str, str]:
    """`scontrol show job -o ID`'s one line -> its fields (JobState, Reason, NodeList, ...)."""
    return {m.group(1): m.group(2) for m in _FIELD.finditer(text)}


def facts_of(fields: Mapping[str, str]) -> dict[str, Any]:
    """The fields the keeper and the verdict use, from parse_show_job's."""
    state = (fields.get("JobState") or "UNKNOWN").split("+")[0]
    code, _, sig = (fields.get("ExitCode") or "").partition(":")
    return {
        "state": state,
        "reason": None if fields.get("Reason") in (None, "None", "(null)") else fields["Reason"],
        "nodes": None if fields.get("NodeList") in (None, "", "(null)") else fields["NodeList"],
        "batch_host": fields.get("BatchHost") or None,
        "exit_code": int(code) if code.isdigit() else None,
        "exit_signal": int(sig) if sig.isdigit() and int(sig) else None,
        "time_limit": fields.get("TimeLimit") or None,
        "run_time": fields.get("RunTime") or None,
    }


def ended(state: str) -> bool:
    return state not in QUEUED + RUNNING


def end_verdict(report: dict[str, Any], facts: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The job's report from the runner's and what Slurm said at the end: Slurm's own ends
    (SLURM_ENDS) name the state, the nodes and where the job was; every report carries the
    Slurm facts (report["slurm"]). A COMPLETED, FAILED or CANCELLED job is judged by its
    processes, as on one host."""
    out = dict(report)
    if not facts:
        return out
    out["slurm"] = dict(facts)
    _place_absent_ranks(out, facts)
    end = SLURM_ENDS.get(str(facts.get("state")))
    if end is None:
        return out  # the job's own end: as on one host
    if facts["state"] == "CANCELLED" and (
        facts.get("cancelled_here") or report.get("outcome") in ("cancelled", "hung")
    ):
        return out  # this job's cancel, or the end of a hang: the runner's scancel
    outcome, what = end
    where = []
    if report.get("stage"):
        where.append(f"in stage '{report['stage']}'")
    step = (report.get("progress") or {}).get("step")
    if step is not None:
        total = (report.get("progress") or {}).get("total")
        where.append(f"at step {step}" + (f" of {total}" if total else ""))
    detail = f"Slurm job {facts.get('job_id')} {facts['state']}: {what}"
    if facts["state"] == "TIMEOUT" and facts.get("time_limit"):
        detail += f" ({facts['time_limit']})"
    if facts["state"] == "NODE_FAIL" and facts.get("failed_nodes"):
        detail += f": {', '.join(facts['failed_nodes'])} stopped answering"
    elif facts.get("nodes"):
        detail += f"; nodes {facts['nodes']}"
    if where:
        detail += ", " + " ".join(where)
    out.update(outcome=outcome, note=detail, summary=f"Job {outcome}: {detail}.")
    out["diagnosis"] = {
        "kind": f"slurm_{facts['state'].lower()}",
        "summary": detail,
        "hint": HINTS.get(facts["state"]),
    }
    from trainbridge.bridge.report_text import reason

    out["reason"] = reason(out)
    return out


def placement(hosts: Sequence[str], world: int) -> dict[int, str]:
    """Task -> node under Slurm's default (block) distribution: the first nodes' tasks
    first, as many on each as the tasks need (srun -m block)."""
    if not hosts or world < 1:
        return {}
    per = -(-world // len(hosts))
    return {rank: hosts[min(rank // per, len(hosts) - 1)] for rank in range(world)}


def _place_absent_ranks(report: dict[str, Any], facts: Mapping[str, Any]) -> None:
    """A rank that never said hello cannot say where it runs: Slurm placed it (facts' hosts,
    its default block distribution), so the verdict names that node."""
    diagnosis = report.get("diagnosis") or {}
    stuck = (diagnosis.get("evidence") or {}).get("hung_rank")
    if diagnosis.get("kind") != "rank_never_started" or not stuck or not facts.get("hosts"):
        return
    from trainbridge.bridge import ranks_hang, report_text

    world = len(stuck["missing"]) + len(stuck["waiting"])
    hosts = placement(facts["hosts"], world)
    absent = [m["rank"] for m in stuck["missing"]]
    ops = sorted({w["collective"] for w in stuck["waiting"]})
    text = ranks_hang.never_said_hello_text(absent, stuck["waiting"], ops, hosts)
    text += f" (Slurm job {facts.get('job_id')} placed it there)"
    missing = [dict(m, host=hosts.get(m["rank"])) for m in stuck["missing"]]
    evidence = dict(diagnosis["evidence"], hung_rank=dict(stuck, missing=missing))
    report["diagnosis"] = dict(diagnosis, summary=text, evidence=evidence)
    report["summary"] = report_text.summary(report)
    report["reason"] = report_text.reason(report)


HINTS = {
    "TIMEOUT": "give the job more time (slurm={'time': ...}) or save checkpoints and resume",
    "NODE_FAIL": "scontrol show node NODE says why; resubmit to other nodes (--exclude=NODE)",
    "PREEMPTED": "resubmit it, or ask for a partition or QOS that is not preempted",
    "OUT_OF_MEMORY": "ask for more memory (slurm={'sbatch': ['--mem=...']}) or use less",
    "CANCELLED": "squeue and the Slurm logs say who cancelled it; submit it again to rerun it",
}


def hello_facts(hello: dict[str, Any]) -> dict[str, Any]:
    """A hello read with its Slurm facts (the worker's `slurm`, docs/PROTOCOL.md): its host is
    its node by Slurm's name (hostnames can be alike), and a process Slurm started itself (a
    task of an `srun` step, or the batch script's command: `task`) with no RANK of its own is
    rank SLURM_PROCID of SLURM_NTASKS. A launcher (torchrun under srun) stays a launcher, and
    a task's own children (its subprocesses inherit the variables) are no rank."""
    facts = hello.get("slurm")
    if not isinstance(facts, dict):
        return hello
    out = dict(hello)
    if isinstance(facts.get("node"), str) and facts["node"]:
        out["host"] = facts["node"]
    if (
        hello.get("rank") is None
        and facts.get("task") is True
        and isinstance(facts.get("procid"), int)
        and isinstance(facts.get("ntasks"), int)
    ):
        from trainbridge.bridge import machine

        if not machine.is_launcher(hello):
            out.update(rank=facts["procid"], world_size=facts["ntasks"])
    return out


# --- the commands (I/O) -----------------------------------------------------------------------
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
        from trainbridge import worker

        signal.signal(signal.SIGTERM, lambda *_: self.cancelled.set())
        signal.signal(signal.SIGINT, lambda *_: self.cancelled.set())
        self.job_id = self.submit()
        self.facts = {"job_id": self.job_id, "state": "PENDING"}
        write_facts(self.dir, self.facts)
        print(f"trainbridge: submitted to Slurm as job {self.job_id}", flush=True)
        stage: Optional[Any] = None
        said_running = False
        cancel_at: Optional[float] = None
        missing = 0
        unreachable = False
        while True:
            if self.cancelled.is_set() and cancel_at is None:
                cancel_at = time.monotonic()
                print(f"trainbridge: cancel: scancel --signal=TERM {self.job_id}", flush=True)
                self.facts["cancelled_here"] = True  # Slurm's CANCELLED is this cancel's
                scancel(self.job_id, "--signal=TERM", "--full")
            grace = float(self.options.get("grace", CANCEL_GRACE_S))
            if cancel_at is not None and time.monotonic() - cancel_at > grace:
                print(f"trainbridge: cancel: scancel {self.job_id} (after {grace:g} s)", flush=True)
                scancel(self.job_id)
                cancel_at = float("inf")
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
                if now["state"] in QUEUED:
                    name = f"queued in Slurm: {now['reason'] or now['state']}"
                    if stage is None or stage.name != name:
                        if stage is not None:
                            stage.__exit__(None, None, None)
                        stage = worker.stage(name)
                        stage.__enter__()
                elif stage is not None:
                    stage.__exit__(None, None, None)
                    stage = None
                if now["state"] in RUNNING and not said_running:
                    said_running = True
                    self.facts["hosts"] = hostnames(now["nodes"])
                    print(
                        f"trainbridge: Slurm job {self.job_id} runs on {now['nodes']}", flush=True
                    )
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
                if ended(now["state"]):
                    break
            self.cancelled.wait(POLL_S)
        if stage is not None:
            stage.__exit__(None, None, None)
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
