"""A two-node Slurm cluster on one machine, for the tests that submit to Slurm as a user of a
training cluster does (/work/shared/SLURM.md). The controller and node tbh1 run in this
network namespace; node tbh2 runs in a network namespace of its own, joined to this one by a
veth pair, as tests/distributed/hosts.py does for torchrun. Both nodes see the same
filesystem, as nodes with a shared home do; only the network differs.

The host's own Slurm setup is neither read nor changed: slurm.conf, the state, spool, log and
pid files live in a private temporary directory, and every daemon and client finds the config
through SLURM_CONF (Cluster.env). Two things stay behind on purpose, both harmless and shared
with whatever else runs here: munged (started only when none answers; stopping it could break
another user of munge) and the /etc/hosts lines for tbh1 and tbh2 (slot 0's addresses, below).

Several clusters at once, one per slot (SLOTS): pytest-xdist workers each run their Slurm
tests on their own cluster instead of waiting for another's (a wait would count against
pytest-timeout's 300 s per test). Slot k has the subnet 10.232.k.0/24 (tbh1 10.232.k.1, tbh2
10.232.k.2), its own ports, namespace and veth names, and an exclusive flock on
/tmp/trainbridge-slurm-K.lock from up() to down(); up() takes the first free slot and waits
only when all are taken. Holding a slot's lock also makes anything left with its names a dead
run's leftovers, which up() removes. The node names are tbh1 and tbh2 in every slot: the
daemons of a slot run in a mount namespace of their own whose /etc/hosts gives the slot's
addresses, so a job resolves the names in SLURM_JOB_NODELIST (MASTER_ADDR=tbh1) to its own
cluster. The test process itself resolves them by the host's /etc/hosts (slot 0): it should
use Cluster.head_addr and node2_addr.

Needs root, iproute2, util-linux (nsenter, unshare, mount, su), slurm-wlm and munge
(`scripts/setup --browser` installs the last two as root)."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Callable, Optional

NODES = ("tbh1", "tbh2")
SLOTS = 4  # clusters at once: one per pytest-xdist worker (scripts/test runs 3)
LOCK_PATH = "/tmp/trainbridge-slurm-{slot}.lock"


def addresses(slot: int) -> tuple[str, str]:
    """Slot's (head_addr, node2_addr): tbh1 and tbh2."""
    return f"10.232.{slot}.1", f"10.232.{slot}.2"


def ports(slot: int) -> tuple[int, int]:
    """Slot's (SlurmctldPort, SlurmdPort). Not Slurm's 6817/6818: a real Slurm on the same
    machine (a workstation that is also a node) is left alone, and it cannot answer in our
    cluster's place."""
    return 6917 + 10 * slot, 6918 + 10 * slot


# The ended states of a job (squeue's "job state codes"); scontrol shows them for MinJobAge.
FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
     "DEADLINE", "OUT_OF_MEMORY"}
)  # fmt: skip
# The binaries the cluster runs; Debian's slurm-wlm and munge, iproute2, util-linux.
_BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "scancel", "srun",
             "munged", "munge", "unmunge", "ip", "nsenter", "unshare", "mount", "su")  # fmt: skip

# The slurm.conf settings beyond SLURM.md's, for tests that must not wait minutes. up() takes
# overrides (e.g. JobRequeue=1 to see a batch job requeued after a node failure).
KNOBS: dict[str, str] = {
    # A node that stops answering is DOWN (and its jobs NODE_FAIL) after this many seconds
    # without an answer; slurmctld pings every SlurmdTimeout/3 s. A ping of a dead slurmd
    # fails only after MessageTimeout (Slurm retries the refused connection that long), and
    # it takes two failed rounds, so MessageTimeout counts as much as SlurmdTimeout. Measured
    # here (kill_node to NODE_FAIL; SlurmdTimeout/MessageTimeout): 20/10 30-34 s, 10/10
    # 30 s, 10/5 18-20 s, 6/5 15 s, 6/3 12-14 s, 3/2 10 s. 6/5 is the smallest pair that
    # leaves a loaded machine slack: a live slurmd answers a ping in milliseconds.
    "SlurmdTimeout": "6",
    # Every RPC's limit (default 10). 5 s is still far above what an answer takes on a
    # loaded 2-core machine; lower would risk making a slow moment a failed RPC.
    "MessageTimeout": "5",
    # Seconds between SIGTERM and SIGKILL at a time limit or a cancel (default 30): the
    # grace a training script gets to write its last words in the TIMEOUT tests.
    "KillWait": "5",
    # An ended job stays in `scontrol show job` this long (there is no slurmdbd/sacct here).
    "MinJobAge": "300",
    # A batch job on a failed node ends NODE_FAIL instead of being requeued (the default,
    # JobRequeue=1, puts it back to PENDING, where a test would wait for it for ever).
    "JobRequeue": "0",
    # A node that was DOWN for not answering is idle again as soon as its slurmd registers
    # (restart_node), without an `scontrol update ... state=resume`.
    "ReturnToService": "2",
    # Not set, on purpose: SchedulerParameters. With the defaults a job submitted to idle
    # nodes starts within about a second (each submit runs the main scheduler; a 2-node job
    # took 3 s from sbatch to COMPLETED); backfill's 30 s interval matters only for jobs
    # queued behind others.
    # Trust CPUs= below rather than what slurmd counts: 2 CPUs per node on any machine (two
    # tasks per node) without the node being drained as "Low socket*core*thread count".
    "SlurmdParameters": "config_overrides",
    # Partition "urgent" (PriorityTier 2, the same nodes) preempts "main"'s jobs (tier 1) by
    # cancelling them: a job ends PREEMPTED as on a cluster with a high-priority queue. Only
    # a job submitted to "urgent" preempts anything.
    "PreemptType": "preempt/partition_prio",
    "PreemptMode": "CANCEL",
}


def _which(name: str) -> Optional[str]:
    """Like `command -v`, also in the sbin directories a non-login root shell may lack."""
    path = os.environ.get("PATH", os.defpath) + ":/usr/local/sbin:/usr/sbin:/sbin"
    return shutil.which(name, path=path)


def cannot_make() -> Optional[str]:
    """Why a cluster cannot be made here, or None."""
    if not os.path.exists("/proc/self/ns/net"):
        return "network namespaces (Linux /proc/PID/ns) are not available"
    if os.geteuid() != 0:
        return "a Slurm test cluster needs root (network namespaces, slurmd, munged)"
    missing = [name for name in _BINARIES if _which(name) is None]
    if missing:
        return (
            f"not installed: {', '.join(missing)} (as root, `scripts/setup --browser` installs"
            " slurm-wlm and munge; ip is iproute2, the others util-linux)"
        )
    return None


@dataclass
class Cluster:
    """A running cluster (up() makes it; down() removes it). `env` is what a process needs
    to talk to it: pass `dict(os.environ, **cluster.env)`, or use run()."""

    slot: int  # 0..SLOTS-1: the addresses, ports and names below are the slot's
    head_addr: str
    node2_addr: str
    nodes: tuple[str, str]
    ns: str  # node 2's network namespace (/run/netns/NS)
    veth: str  # this namespace's end of the veth pair; the other end, in ns, is veth_node2
    veth_node2: str
    conf_dir: str
    env: dict[str, str]
    prefix: str  # up()'s prefix and the slot: the names of the namespace, veth and directory
    _lock: Optional[IO[str]] = field(default=None, repr=False, compare=False)
    _is_down: bool = field(default=False, repr=False, compare=False)

    @property
    def conf(self) -> str:
        return os.path.join(self.conf_dir, "slurm.conf")

    def node2_exec(self, *argv: str) -> list[str]:
        """argv run "on node 2": in its network namespace, with the slot's /etc/hosts
        (in_slot), as slurmd of tbh2 runs and so its jobs. Not `ip netns exec`: that
        remounts /sys, which hides the cgroup tree, and slurmd fails there (SLURM.md)."""
        return ["nsenter", f"--net=/run/netns/{self.ns}", *self.in_slot(*argv)]

    def in_slot(self, *argv: str) -> list[str]:
        """argv run in a mount namespace of its own where /etc/hosts is the slot's (tbh1 and
        tbh2 at this cluster's addresses; the module's docstring), as the daemons and so the
        jobs run. "slave": an `ip netns del` elsewhere still reaches this namespace's copy of
        /run/netns, so it never keeps another slot's namespace alive. The process keeps the
        pid (each step execs the next)."""
        hosts = os.path.join(self.conf_dir, "hosts")
        return [
            "unshare", "--mount", "--propagation", "slave", "--",
            "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"', hosts, *argv,
        ]  # fmt: skip

    def run(self, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """A Slurm client (sbatch, squeue, ...) against this cluster; output captured, not
        checked."""
        return subprocess.run(
            list(argv), env=dict(os.environ, **self.env), capture_output=True, text=True,
            timeout=timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def job(self, jobid: str) -> dict[str, str]:
        """`scontrol show job -o JOBID` as a dict (JobState, Reason, ExitCode, NodeList, ...);
        empty when the controller does not know the job (never, or over MinJobAge ago).
        Values with spaces (Command=, WorkDir=) are cut at the first one."""
        done = self.run("scontrol", "show", "job", "-o", jobid, timeout=30)
        fields: dict[str, str] = {}
        if done.returncode == 0:
            for word in done.stdout.split():
                key, sep, value = word.partition("=")
                if sep and key not in fields:
                    fields[key] = value
        return fields

    def wait_job(
        self, jobid: str, timeout_s: float = 120.0, states: frozenset[str] = FINAL_STATES
    ) -> dict[str, str]:
        """The job's fields once its JobState is one of `states` (by default: it has ended),
        polled; OSError with the last fields seen after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while True:
            fields = self.job(jobid)
            if fields.get("JobState") in states:
                return fields
            if time.monotonic() > deadline:
                raise OSError(
                    f"job {jobid} not in {sorted(states)} after {timeout_s:g} s: {fields}\n"
                    + self.log_tail()
                )
            time.sleep(0.25)

    def node_states(self) -> dict[str, str]:
        """{node: sinfo's state}: "idle", "allocated", "mixed", "down*", "unknown*", ...
        (a trailing * means the node does not answer)."""
        done = self.run("sinfo", "-N", "-h", "-o", "%N %T", timeout=30)
        states: dict[str, str] = {}
        for line in done.stdout.splitlines():
            words = line.split()
            if len(words) == 2:
                states[words[0]] = words[1]
        return states

    def wait_nodes(self, want: dict[str, set[str]], timeout_s: float = 60.0) -> None:
        """Until each named node's state is one of its set; OSError with the logs after
        timeout_s. A node that answers but stays "down" (ReturnToService missed it) is
        resumed, once."""
        deadline = time.monotonic() + timeout_s
        resumed: set[str] = set()
        while True:
            states = self.node_states()
            if all(states.get(node) in ok for node, ok in want.items()):
                return
            for node, ok in want.items():
                if states.get(node) == "down" and "down" not in ok and node not in resumed:
                    self.run("scontrol", "update", f"nodename={node}", "state=resume")
                    resumed.add(node)
            if time.monotonic() > deadline:
                raise OSError(
                    f"Slurm nodes not {want} after {timeout_s:g} s: {states}\n" + self.log_tail()
                )
            time.sleep(0.25)

    def processes(self) -> list[int]:
        """The live processes of this cluster: those whose SLURM_CONF is its slurm.conf (its
        daemons, their slurmstepd, and the tasks of jobs submitted with `env`, which sbatch
        passes on). Another slot's cluster, or a job of the same script there, is not among
        them, which `pgrep -f SCRIPT` cannot tell."""
        return [p for p in _pids() if _slurm_conf_of(p) == self.conf and _alive(p)]

    def slurmd_pid(self, node: str) -> Optional[int]:
        """The pid of the node's slurmd while it runs, else None (a stale pid file, or a pid
        since taken by another program, is None)."""
        try:
            with open(self._pid_file(node)) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        if not _alive(pid) or _comm(pid) != "slurmd" or _slurm_conf_of(pid) != self.conf:
            return None
        return pid

    def kill_node(self, node: str, wait_s: float = 10.0) -> list[int]:
        """The node dies as a machine does: SIGKILL to its slurmd and everything running on
        it, so nothing answers for it and nothing tells the controller. tbh2: every process
        in its network namespace (found by the inode of /proc/PID/ns/net: slurmd,
        slurmstepd, the job's tasks). tbh1 shares this namespace with the controller and the
        test: its slurmd, our slurmstepd processes there and their descendants. Returns the
        pids killed; OSError if one is still alive after wait_s."""
        self._check_node(node)
        victims: set[int] = set()
        pid = self.slurmd_pid(node)
        if pid is not None:
            victims.add(pid)
        if node == self.nodes[1]:
            ns = _ns_id(f"/run/netns/{self.ns}")
            victims.update(p for p in _pids() if ns is not None and _proc_ns(p) == ns)
        else:
            here = _proc_ns(os.getpid())
            steps = [
                p for p in _pids()
                if _comm(p) == "slurmstepd" and _proc_ns(p) == here
                and _slurm_conf_of(p) == self.conf
            ]  # fmt: skip
            victims.update(steps)
            victims.update(_descendants(steps))
        victims.discard(os.getpid())
        left = _kill_all(sorted(victims), wait_s)
        if left:
            raise OSError(f"node {node}: still alive {wait_s:g} s after SIGKILL: {left}")
        return sorted(victims)

    def restart_node(self, node: str, timeout_s: float = 60.0) -> None:
        """Start the node's slurmd again (if it is not running) and wait until the node is
        idle (ReturnToService=2 returns a node DOWN for not answering once it registers)."""
        self._check_node(node)
        if self.slurmd_pid(node) is None:
            self._start_slurmd(node)
        self.wait_nodes({node: {"idle"}}, timeout_s)

    def log_tail(self, lines: int = 25) -> str:
        """The ends of the daemons' logs, for an error message."""
        parts = []
        for name in ("slurmctld", *(f"slurmd-{n}" for n in self.nodes)):
            for ext in ("log", "stderr"):
                path = os.path.join(self.conf_dir, "log", f"{name}.{ext}")
                try:
                    with open(path, errors="replace") as f:
                        tail = f.read().splitlines()[-lines:]
                except OSError:
                    continue
                if tail:
                    parts.append(f"--- {path}\n" + "\n".join(tail))
        return "\n".join(parts) or "(no daemon logs)"

    def down(self, wait_s: float = 30.0) -> None:
        """Remove everything up() made: the jobs (cancelled), slurmctld (`scontrol
        shutdown`), both slurmd (by their pid files), any process left with our SLURM_CONF
        or in node 2's namespace (SIGKILL), the veth pair, the namespace and the directory;
        then release the lock. Idempotent; every step runs even when one before failed, and
        anything of ours still there at the end is an OSError, not a leak for the next run.
        munged is left running (see the module's docstring)."""
        if self._is_down:
            return
        errors: list[str] = []
        try:
            self._stop_daemons(wait_s, errors)
            errors.extend(_remove_network(self.ns, self.veth, wait_s))
            shutil.rmtree(self.conf_dir, ignore_errors=True)
            left = self.processes()
            if left:
                errors.append(f"processes of the cluster still alive: {_describe(left)}")
            if os.path.exists(self.conf_dir):
                errors.append(f"{self.conf_dir} could not be removed")
        finally:
            self._is_down = True
            if self._lock is not None:
                self._lock.close()  # releases the flock
                self._lock = None
        if errors:
            raise OSError("Slurm test cluster not fully removed: " + "; ".join(errors))

    # -- inside ---------------------------------------------------------------------------

    def _check_node(self, node: str) -> None:
        if node not in self.nodes:
            raise ValueError(f"no node {node!r} (nodes: {', '.join(self.nodes)})")

    def _pid_file(self, node: str) -> str:
        return os.path.join(self.conf_dir, "run", f"slurmd-{node}.pid")

    def _daemon_env(self) -> dict[str, str]:
        """A daemon's environment: only what it needs, not the test process's (pytest's,
        coverage's and the worker's variables mean nothing to slurmd)."""
        path = os.environ.get("PATH", os.defpath) + ":/usr/local/sbin:/usr/sbin:/sbin"
        return {"PATH": path, "LANG": "C", "HOME": "/root", **self.env}

    def _daemon(self, name: str, argv: list[str]) -> None:
        """Start a daemon that forks into the background, as SLURM.md does; its stdout and
        stderr go to a file (a pipe would stay open in the daemon and hang the wait)."""
        err_path = os.path.join(self.conf_dir, "log", f"{name}.stderr")
        with open(err_path, "ab") as err:
            done = subprocess.run(
                argv, env=self._daemon_env(), stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                timeout=60,
            )  # fmt: skip
        if done.returncode != 0:
            raise OSError(f"{name} did not start (exit {done.returncode})\n" + self.log_tail())

    def _start_slurmd(self, node: str) -> None:
        argv = [_binary("slurmd"), "-N", node]
        if node == self.nodes[1]:
            self._daemon(f"slurmd-{node}", self.node2_exec(*argv))
        else:
            self._daemon(f"slurmd-{node}", self.in_slot(*argv))

    def _start(self, settings: dict[str, str], timeout_s: float) -> None:
        """The namespace and veth pair, the config, the three daemons; then wait until both
        nodes are idle."""
        _make_network(self)
        for sub in ("state", "log", "run", *(f"spool/{n}" for n in self.nodes)):
            os.makedirs(os.path.join(self.conf_dir, sub), exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(_slurm_conf(self, settings))
        open(os.path.join(self.conf_dir, "plugstack.conf"), "w").close()
        with open(os.path.join(self.conf_dir, "hosts"), "w") as f:
            f.write(_hosts_text(self))
        self._daemon("slurmctld", self.in_slot(_binary("slurmctld")))
        for node in self.nodes:
            self._start_slurmd(node)
        self.wait_nodes({node: {"idle"} for node in self.nodes}, timeout_s)

    def _stop_daemons(self, wait_s: float, errors: list[str]) -> None:
        ctld = self._ctld_pid()
        if ctld is not None:
            try:
                jobs = self.run("squeue", "-h", "-o", "%A", timeout=30).stdout.split()
                if jobs:
                    self.run("scancel", *jobs, timeout=30)
                    _wait(lambda: not self.run("squeue", "-h", "-o", "%A").stdout.split(), 15.0)
                self.run("scontrol", "shutdown", timeout=30)
            except subprocess.TimeoutExpired as exc:
                errors.append(f"{exc.cmd[0]} did not answer")
            if not _wait(lambda: not _alive(ctld), wait_s):
                errors.append(f"slurmctld {ctld} did not stop in {wait_s:g} s; killed")
        # `scontrol shutdown` stops the slurmd it reaches; the pid files find the others.
        slurmds = [p for p in (self.slurmd_pid(n) for n in self.nodes) if p is not None]
        for pid in slurmds:
            _signal(pid, signal.SIGTERM)
        if not _wait(lambda: not any(_alive(p) for p in slurmds), wait_s):
            errors.append(f"slurmd {slurmds} did not stop on SIGTERM in {wait_s:g} s; killed")
        # What is left: a job's slurmstepd and tasks, a daemon that did not stop.
        ours = [p for p in _pids() if _slurm_conf_of(p) == self.conf]
        ns = _ns_id(f"/run/netns/{self.ns}")
        ours += [p for p in _pids() if ns is not None and _proc_ns(p) == ns]
        ours = sorted(set(ours) - {os.getpid()})
        left = _kill_all(ours, wait_s)
        if left:
            errors.append(f"still alive after SIGKILL: {_describe(left)}")

    def _ctld_pid(self) -> Optional[int]:
        try:
            with open(os.path.join(self.conf_dir, "run", "slurmctld.pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) and _slurm_conf_of(pid) == self.conf else None


def up(
    prefix: str = "tbs",
    settings: Optional[dict[str, str]] = None,
    timeout_s: float = 60.0,
    lock_wait_s: float = 240.0,
) -> Cluster:
    """Make and start a cluster in the first free slot; Cluster.down() it after. `settings`:
    slurm.conf lines that replace or add to KNOBS. Waits up to lock_wait_s for a free slot
    (all SLOTS taken: see the module's docstring) and up to timeout_s for both nodes to be
    idle. Raises OSError with the reason (and the daemons' logs), having removed what it
    made."""
    why = cannot_make()
    if why is not None:
        raise OSError(why)
    if not prefix.isalnum() or len(prefix) > 10:  # veth names: 15 bytes at most
        raise ValueError(f"prefix {prefix!r}: up to 10 letters and digits")
    foreign: dict[int, str] = {}  # slots whose subnet something else uses here
    while True:
        slot, lock = _take_slot(lock_wait_s, set(foreign))
        name = f"{prefix}{slot}"
        head_addr, node2_addr = addresses(slot)
        try:
            _sweep(name)
        except BaseException:
            lock.close()
            raise
        held = _address_user(head_addr)
        if held is None:
            break
        lock.close()
        foreign[slot] = held
        if len(foreign) == SLOTS:
            raise OSError(f"every slot's address is in use here: {foreign}")
    try:
        _start_munge()
        _hosts_file(dict(zip(addresses(0), NODES)))
        conf_dir = tempfile.mkdtemp(prefix=f"{name}-slurm-", dir="/tmp")
        os.chmod(conf_dir, 0o755)  # a job of another user reads slurm.conf too
    except BaseException:
        lock.close()
        raise
    cluster = Cluster(
        slot=slot,
        head_addr=head_addr,
        node2_addr=node2_addr,
        nodes=NODES,
        ns=name,
        veth=f"{name}-h",
        veth_node2=f"{name}-n",
        conf_dir=conf_dir,
        env={"SLURM_CONF": os.path.join(conf_dir, "slurm.conf")},
        prefix=name,
        _lock=lock,
    )
    try:
        cluster._start(dict(KNOBS, **(settings or {})), timeout_s)
    except BaseException as exc:
        try:
            cluster.down()
        except OSError as cleanup:
            raise OSError(f"{exc}\n(and removing it: {cleanup})") from exc
        raise
    return cluster


# -- the machine ----------------------------------------------------------------------------


def _binary(name: str) -> str:
    found = _which(name)
    if found is None:
        raise OSError(f"{name} is not installed")
    return found


def _slurm_conf(cluster: Cluster, settings: dict[str, str]) -> str:
    """SLURM.md's slurm.conf, with our directories and ports and the settings. SlurmctldHost
    must be this machine's hostname (slurmctld refuses to run elsewhere), with the address in
    brackets: tbh2 reaches the controller at the head's address."""
    d = cluster.conf_dir
    head, node2 = cluster.nodes
    ctld_port, slurmd_port = ports(cluster.slot)
    lines = [
        "ClusterName=tb",
        f"SlurmctldHost={socket.gethostname().split('.')[0]}({cluster.head_addr})",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "AuthType=auth/munge",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        # An empty one of ours, not the host's /etc/slurm/plugstack.conf (SPANK plugins).
        f"PlugStackConfig={d}/plugstack.conf",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        *(f"{key}={value}" for key, value in settings.items()),
        f"NodeName={head} NodeAddr={cluster.head_addr} CPUs=2 State=UNKNOWN",
        f"NodeName={node2} NodeAddr={cluster.node2_addr} CPUs=2 State=UNKNOWN",
        f"PartitionName=main Nodes={head},{node2} Default=YES MaxTime=INFINITE State=UP "
        "PriorityTier=1",
        f"PartitionName=urgent Nodes={head},{node2} MaxTime=INFINITE State=UP PriorityTier=2",
    ]
    return "\n".join(lines) + "\n"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _make_network(cluster: Cluster) -> None:
    """Node 2's namespace and the veth pair (SLURM.md)."""
    ns, veth, peer = cluster.ns, cluster.veth, cluster.veth_node2
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", ns)
        _ip("addr", "add", f"{cluster.head_addr}/24", "dev", veth)
        _ip("link", "set", veth, "up")
        _ip("-n", ns, "addr", "add", f"{cluster.node2_addr}/24", "dev", peer)
        _ip("-n", ns, "link", "set", peer, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
    except subprocess.CalledProcessError as exc:
        stderr = exc.stderr.decode(errors="replace").strip()
        raise OSError(f"cannot make node 2's network namespace: {stderr}") from None


def _address_user(addr: str) -> Optional[str]:
    """The interface that has addr here already (not ours: up() swept the slot's), or None.
    A cluster made by other means, or by an older version of this module: up() leaves it
    alone and takes another slot, since a second interface with the subnet would make the
    routes ambiguous."""
    held = subprocess.run(
        ["ip", "-o", "addr", "show", "to", f"{addr}/32"],
        capture_output=True, text=True, timeout=10,
    ).stdout.split()  # fmt: skip
    return held[1] if len(held) > 1 else None


def _remove_network(ns: str, veth: str, wait_s: float) -> list[str]:
    """Delete the veth pair (both ends go together) and the namespace, trying again until
    both are gone: the namespace's last process may still be exiting. Returns what is left."""
    deadline = time.monotonic() + wait_s
    while True:
        subprocess.run(["ip", "link", "del", veth], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        left = []
        if os.path.exists(f"/run/netns/{ns}"):
            left.append(f"network namespace {ns}")
        if os.path.exists(f"/sys/class/net/{veth}"):
            left.append(f"veth {veth}")
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _sweep(name: str) -> None:
    """What a run that died without down() left in this slot (we hold its lock, so nothing
    with its names belongs to a live cluster): its processes, namespace, veth and
    directories."""
    base = f"/tmp/{name}-slurm-"
    ns = name
    ns_id = _ns_id(f"/run/netns/{ns}")
    mine = {os.getpid(), *_ancestors(os.getpid())}
    stale = [
        p for p in _pids()
        if p not in mine
        and ((_slurm_conf_of(p) or "").startswith(base)
             or (ns_id is not None and _proc_ns(p) == ns_id))
    ]  # fmt: skip
    left = _kill_all(stale, 10.0)
    if left:
        raise OSError(f"a dead run's Slurm processes do not end: {_describe(left)}")
    gone = _remove_network(ns, f"{name}-h", 10.0)
    if gone:
        raise OSError(f"a dead run's {', '.join(gone)} cannot be removed")
    for name in os.listdir("/tmp"):
        if f"/tmp/{name}".startswith(base):
            shutil.rmtree(f"/tmp/{name}", ignore_errors=True)


def _take_slot(wait_s: float, skip: set[int]) -> tuple[int, IO[str]]:
    """The first slot (not in skip) whose exclusive flock is free, polled until wait_s (a
    blocking flock could not time out, nor take whichever slot frees first); who holds it is
    written inside, for a waiter's error message. The descriptor is not inherited (Python's
    default), so the daemons never hold the lock."""
    deadline = time.monotonic() + wait_s
    while True:
        holders = []
        for slot in range(SLOTS):
            if slot in skip:
                continue
            f = open(LOCK_PATH.format(slot=slot), "a+")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holders.append(f.read().strip() or "unknown")
                f.close()
                continue
            f.seek(0)
            f.truncate()
            f.write(f"pid {os.getpid()} since {time.strftime('%H:%M:%S')}\n")
            f.flush()
            return slot, f
        if time.monotonic() > deadline:
            raise OSError(
                f"all {SLOTS} Slurm test cluster slots stayed taken for {wait_s:g} s"
                f" ({'; '.join(holders)})"
            )
        time.sleep(0.2)


def _munge_answers() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        if cred.returncode != 0:
            return False
        back = subprocess.run(["unmunge"], input=cred.stdout, capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return back.returncode == 0


def _start_munge() -> None:
    """munged as SLURM.md starts it (as the munge user), unless one answers already; a key
    is made only when there is none. It is left running after down()."""
    if _munge_answers():
        return
    dirs = ["/etc/munge", "/run/munge", "/var/lib/munge", "/var/log/munge"]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    key = "/etc/munge/munge.key"
    if not os.path.exists(key):
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400), "wb") as f:
            f.write(os.urandom(1024))
    subprocess.run(["chown", "-R", "munge:munge", *dirs], check=True, timeout=30)
    os.chmod(key, 0o400)
    # A pid file of a munged that died would stop a new one ("pidfile exists").
    for stale in ("/run/munge/munged.pid",):
        if os.path.exists(stale):
            os.remove(stale)
    done = subprocess.run(
        ["su", "-s", "/bin/sh", "munge", "-c", _binary("munged")],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30,
    )  # fmt: skip
    if done.returncode != 0 or not _wait(_munge_answers, 15.0):
        stderr = done.stderr.decode(errors="replace").strip()
        raise OSError(f"munged did not start (exit {done.returncode}): {stderr}")


def _hosts_text(cluster: Cluster) -> str:
    """The slot's /etc/hosts: the host's, with tbh1 and tbh2 at the slot's addresses."""
    with open("/etc/hosts") as f:
        lines = [
            line for line in f.read().splitlines()
            if not set(line.split("#", 1)[0].split()[1:]) & set(cluster.nodes)
        ]  # fmt: skip
    lines += [f"{cluster.head_addr} {cluster.nodes[0]}", f"{cluster.node2_addr} {cluster.nodes[1]}"]
    return "\n".join(lines) + "\n"


def _hosts_file(want: dict[str, str]) -> None:
    """/etc/hosts lines ADDR NAME for those missing, once. A name already given to another
    address would be resolved to that one first: an error, not a second line."""
    with open("/etc/hosts") as f:
        text = f.read()
    have: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        for name in words[1:]:
            have.setdefault(name, words[0])
    missing = []
    for addr, name in want.items():
        if name not in have:
            missing.append(f"{addr} {name}")
        elif have[name] != addr:
            raise OSError(f"/etc/hosts gives {name} the address {have[name]}, not {addr}")
    if missing:
        with open("/etc/hosts", "a") as f:
            f.write(("" if text.endswith("\n") or not text else "\n") + "\n".join(missing) + "\n")


# -- processes ------------------------------------------------------------------------------


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat(pid: int) -> Optional[list[str]]:
    """/proc/PID/stat's fields after the command name (state first, then ppid), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """Running (a zombie no one reaps has ended for our purposes)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _comm(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def _slurm_conf_of(pid: int) -> Optional[str]:
    """The process's SLURM_CONF: the daemons, slurmstepd and a job's tasks all have it, and
    it names the cluster they belong to."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(b"SLURM_CONF="):
            return entry[len(b"SLURM_CONF=") :].decode(errors="replace")
    return None


def _ns_id(path: str) -> Optional[tuple[int, int]]:
    """A network namespace's identity (device and inode of its nsfs file), or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _proc_ns(pid: int) -> Optional[tuple[int, int]]:
    return _ns_id(f"/proc/{pid}/ns/net")


def _ancestors(pid: int) -> list[int]:
    found = []
    while pid > 1:
        fields = _stat(pid)
        if fields is None:
            break
        pid = int(fields[1])
        found.append(pid)
    return found


def _descendants(roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat(pid)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(pid)
    found: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _kill_all(pids: list[int], wait_s: float) -> list[int]:
    """SIGKILL each and wait until all have ended; returns those still alive after wait_s."""
    for pid in pids:
        _signal(pid, signal.SIGKILL)
    _wait(lambda: not any(_alive(p) for p in pids), wait_s)
    return [p for p in pids if _alive(p)]


def _describe(pids: list[int]) -> str:
    return ", ".join(f"{p} ({_comm(p)})" for p in pids)


def _wait(ready: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ready() until it is true (True) or timeout_s has passed (False)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
