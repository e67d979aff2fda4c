"""A Slurm job's rules (docs/SCALE.md), pure: values in, values out. The options a user gives,
sbatch's arguments, what `scontrol show job` says, a hello's Slurm facts (its node, an srun
task's rank), and the verdict of Slurm's own ends (TIMEOUT, NODE_FAIL, PREEMPTED,
OUT_OF_MEMORY, an scancel from outside), with the node of a rank that never said hello.

    sched = bridge.Scheduler(store="~/jobs.db", backend="slurm",
                             slurm={"listen": "10.0.0.1", "partition": "gpu"})
    job_id = sched.submit(["srun", "torchrun", ...], slurm={"nodes": 2, "time": "2:00:00"})

The runner that submits and follows a job, and the keeper's follower, are the I/O around
these: bridge/slurm_runner.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from trainbridge.bridge import listen

OUTPUT_PATTERN = "slurm-%j.out"  # sbatch --output, in the job's directory
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
    try:
        listen.parse_listen(out["listen"])
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


# --- what Slurm says ---------------------------------------------------------------------------
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


def placement(
    hosts: Sequence[str], world: int, known: Optional[Mapping[int, Any]] = None
) -> dict[int, str]:
    """Task -> node as Slurm distributed the tasks: block (its default, srun -m block, and
    torchrun's node ranks: the first node's tasks first) or cyclic (srun -m cyclic: one per
    node in turn), whichever agrees with where the ranks that said hello run (`known`: rank ->
    its node). With nothing to tell them apart by, block. A rank on whose node the two that
    agree differ, or every rank when neither agrees, is left out: not named rather than
    named wrong."""
    if not hosts or world < 1:
        return {}
    per = -(-world // len(hosts))
    block = {rank: hosts[min(rank // per, len(hosts) - 1)] for rank in range(world)}
    cyclic = {rank: hosts[rank % len(hosts)] for rank in range(world)}
    seen = {rank: host for rank, host in (known or {}).items() if host in hosts}
    fits = [p for p in (block, cyclic) if all(p.get(r) == h for r, h in seen.items())]
    if not seen:
        fits = [block]
    if not fits:
        return {}
    return {rank: host for rank, host in fits[0].items() if all(p[rank] == host for p in fits)}


def _place_absent_ranks(report: dict[str, Any], facts: Mapping[str, Any]) -> None:
    """A rank that never said hello cannot say where it runs: Slurm placed it (facts' hosts,
    in the distribution where the ranks that did say hello are), so the verdict names that
    node when it is known."""
    diagnosis = report.get("diagnosis") or {}
    stuck = (diagnosis.get("evidence") or {}).get("hung_rank")
    if diagnosis.get("kind") != "rank_never_started" or not stuck or not facts.get("hosts"):
        return
    from trainbridge.bridge import ranks_hang, report_text

    world = len(stuck["missing"]) + len(stuck["waiting"])
    known = {w["rank"]: w.get("host") for w in stuck["waiting"]}
    hosts = placement(facts["hosts"], world, known)
    absent = [m["rank"] for m in stuck["missing"]]
    if not any(rank in hosts for rank in absent):
        return  # where Slurm put it is not known: the verdict as it is
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
