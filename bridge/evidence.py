"""Evidence about a live job, gathered from the OS (docs/DIAGNOSIS.md layer 1: judge the
blocking direction from outside). This module assembles it; each concern has its own room:

- bridge/procfs.py: the main thread's kernel wait (/proc/<pid>/task/<pid>/wchan and
  syscall, and what the syscall's fd points at), states, names, start times, CPU time,
  I/O counters, memory, descendants;
- bridge/sockets.py: TCP/UDP sockets with their remote ends, and the peer of an AF_UNIX wait;
- bridge/gpu.py: the GPU through NVML (pynvml) when there is one;
- bridge/pyspy.py: a py-spy dump when py-spy is installed;
- bridge/oom.py: the cgroup's OOM kill count (read around the job, not by collect()).

sample(pid) looks at the job's process tree once, and measure(first, states) at the end of
a short window (CPU and I/O deltas, the main thread's sampled states, children and their
states); collect(pid) is the three steps in one
blocking call. live(pid, mark) is the cheap look shown while a job is stalled. All are
bounded in time and never raise: what could not be read becomes a note. The rules that
judge this evidence live in bridge/diagnosis_hang.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any, Optional

from trainbridge.bridge import childstack, filelocks, gpu, proc_states, procfs, pyspy, sockets

STATE_SAMPLE_S = 0.02


def main_thread_states(pid: int, until: float) -> list[dict[str, str]]:
    """The main thread sampled every STATE_SAMPLE_S until `until` (procfs.main_thread_sample;
    at least once). measure() counts them: the rules judge by these counts, not by one read
    at the end that may catch a sleeping loop between two sleeps (margins against
    sampling jitter)."""
    states = []
    while True:
        sample = procfs.main_thread_sample(pid)
        if sample is not None:
            states.append(sample)
        left = until - time.monotonic()
        if left <= 0:
            return states
        time.sleep(min(STATE_SAMPLE_S, left))


def _cpu_s(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        cpu = procfs.cpu_seconds(pid)
        if cpu is not None:
            out[pid] = cpu
    return out


def _child(kid: int) -> dict[str, Any]:
    """One look at a descendant: name, state, parent, command line, start and kernel wait;
    {"pid", "status": "gone"} when it has ended."""
    entry: dict[str, Any] = {"pid": kid}
    fields = procfs.stat_fields(kid)
    if fields is None:
        entry["status"] = "gone"
        return entry
    entry.update(
        name=procfs.process_name(kid),
        status=proc_states.word(fields[0]),
        ppid=int(fields[1]),
        cmdline=" ".join(procfs.cmdline(kid) or [])[:200],
        started=procfs.start_ticks(kid),
    )
    wchan = procfs.read(f"/proc/{kid}/wchan")
    if wchan:
        entry["wchan"] = wchan.strip() or None
    return entry


def _children(
    pid: int,
    seen: dict[int, dict[str, Any]],
    cpu0: dict[int, float],
    cpu1: dict[int, float],
    window: float,
) -> tuple[list[dict[str, Any]], int]:
    """The job's descendants at the end of the window, and those the first look saw
    (`seen`) that are gone by then: a hang's snapshot can meet the stop that follows it on a
    loaded machine (its SIGTERM), and the children as they were at the verdict are the
    evidence. Such a child keeps the first look's entry with "gone_at_end": True. Returns
    (children, how many of them only the first look saw)."""
    out = []
    for kid in procfs.all_descendants(pid):
        entry = _child(kid)
        if entry["status"] == "gone" and kid in seen:
            continue  # ended between the two reads: the first look's entry says more
        if kid in cpu0 and kid in cpu1 and window > 0:
            entry["cpu_fraction"] = round((cpu1[kid] - cpu0[kid]) / window, 3)
        out.append(entry)
    listed = {c["pid"] for c in out}
    gone = [
        {**entry, "gone_at_end": True}
        for kid, entry in seen.items()
        if kid not in listed and entry.get("status") != "gone"
    ]
    return out + gone, len(gone)


def collect(pid: int, window_s: float = 0.5) -> dict[str, Any]:
    """Evidence about the job whose main process is `pid`: sample(), the main thread's
    states over window_s, measure(). Never raises; takes about window_s plus a little
    reading."""
    first: dict[str, Any] = {}
    try:
        first = sample(pid)
        # The window is a measurement interval, not synchronisation: deltas need two looks.
        return measure(first, main_thread_states(pid, first["t"] + max(0.0, window_s)))
    except Exception as exc:  # noqa: BLE001 - evidence is best effort: a bug here must not hide the job
        # What the first look read is kept: a failure later in the window costs only the rest.
        ev: dict[str, Any] = {k: first[k] for k in ("status", "name", "alive") if k in first}
        notes = list(first.get("notes") or []) + [f"evidence failed: {type(exc).__name__}: {exc}"]
        return {"pid": pid, "window_s": window_s, **ev, "notes": notes}


def sample(pid: int) -> dict[str, Any]:
    """One look at the job's main process and its tree, no waiting: the start of the window
    that measure() ends. Notes each child as it is now (measure() keeps those gone by the end
    of the window). Starts py-spy, which answers during the window."""
    notes: list[str] = []
    first: dict[str, Any] = {"pid": pid, "notes": notes, "t": time.monotonic()}
    fields = procfs.stat_fields(pid)
    if fields is None:
        if not os.path.exists(f"/proc/{pid}"):
            first["alive"] = False
            notes.append("process is gone")
            return first
        notes.append(f"process not readable (/proc/{pid}/stat)")
        first["alive"] = True
        first["unreadable"] = True
        return first
    first["status"] = proc_states.word(fields[0])
    first["name"] = procfs.process_name(pid)
    first["alive"] = fields[0] != "Z"
    first["spy"] = pyspy.start(pid)
    first["tree"] = [pid, *procfs.all_descendants(pid)]
    first["children"] = {kid: _child(kid) for kid in first["tree"][1:]}
    first["main_thread"] = procfs.main_thread(pid, [])  # measure() reads it again, with notes
    first["t"] = time.monotonic()
    first["tree_cpu"], first["io"] = _cpu_s(first["tree"]), procfs.io_counters(pid)
    return first


def measure(
    first: dict[str, Any], states: Sequence[Optional[dict[str, str]]] = ()
) -> dict[str, Any]:
    """The evidence over the window since `first` (a sample()): CPU fraction, I/O delta, the
    main thread's kernel wait now and the share of `states` (its samples during the window)
    in which it was runnable: on a loaded machine a spinning process gets little CPU but is
    always runnable (R), which a sleeping one never is. Then threads, memory, sockets,
    children, the AF_UNIX peer, GPU and py-spy."""
    pid = first["pid"]
    notes = list(first["notes"])
    ev: dict[str, Any] = {"pid": pid, "window_s": None, "notes": notes}
    if first["alive"] is False:
        ev["alive"] = False
        ev.update(gpu.facts())
        return ev
    if first.get("unreadable"):
        ev["alive"] = True
        return ev
    tree, cpu0, io0 = first["tree"], first["tree_cpu"], first["io"]
    ev["status"], ev["name"], ev["alive"] = first["status"], first["name"], first["alive"]
    cpu1, io1 = _cpu_s(tree), procfs.io_counters(pid)
    elapsed = max(1e-6, time.monotonic() - first["t"])
    ev["window_s"] = round(elapsed, 3)
    if pid in cpu0 and pid in cpu1:
        ev["cpu_fraction"] = round((cpu1[pid] - cpu0[pid]) / elapsed, 3)
    if io0 and io1:
        ev["io_delta"] = {k: io1[k] - io0[k] for k in io0}
    elif io0 is None:
        notes.append("I/O counters not readable")
    status = procfs.state_word(pid)
    if status is None:
        # Ended during the window (a slow snapshot that met the stop's SIGTERM, on a loaded
        # machine): the first look is the evidence of what it was doing at the verdict.
        ev["alive"], ev["ended_in_window"] = False, True
        ev["main_thread"] = {**(first.get("main_thread") or {}), "gone_at_end": True}
        notes.append(
            "process ended during the window: its main thread's wait is the one the first look saw"
        )
    else:
        ev["status"] = status
        ev["main_thread"] = procfs.main_thread(pid, notes)
    seen = [x for x in states if x is not None]
    if seen:
        ev["main_thread"]["runnable_fraction"] = round(
            sum(x["state"] == "R" for x in seen) / len(seen), 3
        )
        waits: dict[str, int] = {}
        for x in seen:
            waits[x["wait"]] = waits.get(x["wait"], 0) + 1
        ev["main_thread"]["wait_samples"] = waits
    threads, rss = procfs.num_threads(pid), procfs.rss_bytes(pid)
    if threads is not None:
        ev["threads"] = threads
    if threads is not None and rss is not None:
        ev["rss_bytes"] = rss
    ev["sockets"] = sockets.inet_sockets(tree, notes)
    sockets.add_loopback_peers(ev["sockets"], tree, notes)
    ev["children"], gone = _children(pid, first.get("children") or {}, cpu0, cpu1, elapsed)
    if gone:
        notes.append(
            f"{gone} child process(es) seen at the start of the window had ended by its end "
            "(the job being stopped?): they are shown as the first look saw them"
        )
    peer = sockets.local_peer(pid, ev["main_thread"], [c["pid"] for c in ev["children"]])
    if peer:
        ev["unix_peer"] = peer
    locks = filelocks.file_locks(pid, tree, notes)
    if locks:
        ev["file_locks"] = locks  # the holders of locks on files it has open
    # the waited-on child's own stack
    childstack.add(ev["children"], (peer or {}).get("pid"), notes)
    ev.update(gpu.facts(tree))
    spy = first["spy"]
    ev["py_spy"] = pyspy.finish(spy, time.monotonic() + pyspy.TIMEOUT_S, notes)
    if spy is None:
        notes.append("py-spy not installed (optional)")
    return ev


# --- the live look while a job is stalled -----------------------------------------------
def live(pid: int, previous: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """A cheap look at a live job, for the diagnosis shown while it is stalled: no window
    (the CPU fraction is measured since `previous`, the "mark" of the last look), no py-spy,
    no GPU, and the socket the main thread waits on is looked up once per socket (the mark
    remembers it: reading every TCP socket of the machine is what costs). Never raises."""
    notes: list[str] = []
    ev: dict[str, Any] = {"pid": pid, "notes": notes, "live": True}
    previous = previous or {}
    try:
        fields = procfs.stat_fields(pid)
        if fields is None:
            ev["alive"] = False
            return ev
        ticks = os.sysconf("SC_CLK_TCK")
        now = time.monotonic()
        cpu_s = (int(fields[11]) + int(fields[12])) / ticks
        ev["status"] = proc_states.word(fields[0])
        ev["alive"] = fields[0] != "Z"
        mark: dict[str, Any] = {"t": now, "cpu_s": cpu_s}
        ev["mark"] = mark
        if previous.get("t") is not None and now - previous["t"] >= 0.2:
            ev["cpu_fraction"] = round((cpu_s - previous["cpu_s"]) / (now - previous["t"]), 3)
            ev["window_s"] = round(now - previous["t"], 3)
        main = procfs.main_thread(pid, notes)
        ev["main_thread"] = main
        children: list[dict[str, Any]] = []
        for kid in procfs.tree_pids(pid):
            kf = procfs.stat_fields(kid)
            if kf is None:
                continue
            children.append(
                {
                    "pid": kid,
                    "name": (procfs.read(f"/proc/{kid}/comm") or "").strip(),
                    "status": proc_states.word(kf[0]),
                    "ppid": int(kf[1]),
                    "started": int(kf[19]),
                }
            )
        ev["children"] = children
        target = str(main.get("fd_target") or "")
        if target.startswith("socket:"):
            if previous.get("socket") == target:
                found = previous.get("found") or {}
                if found.get("fd_family"):
                    main["fd_family"] = found["fd_family"]
            else:
                found = {}
                peer = sockets.local_peer(pid, main, [c["pid"] for c in children])
                if peer:
                    found = {"fd_family": "unix", "unix_peer": peer}
                else:
                    found = {"sockets": sockets.inet_sockets([pid], notes)}
                    sockets.add_loopback_peers(found["sockets"], [pid], notes)
            mark.update(socket=target, found=found)
            if "unix_peer" in found:
                ev["unix_peer"] = found["unix_peer"]
            if "sockets" in found:
                ev["sockets"] = found["sockets"]
        # The file locks: looked up again only when /proc/locks changed (the mark keeps them)
        locks = filelocks.read_locks()
        if locks is not None and previous.get("locks") == locks:
            held = previous.get("file_locks") or []
        else:
            held = filelocks.file_locks(pid, [pid, *(c["pid"] for c in children)], notes, locks)
        mark.update(locks=locks, file_locks=held)
        if held:
            ev["file_locks"] = held
        childstack.add(children, (ev.get("unix_peer") or {}).get("pid"), notes, py_spy=False)
    except Exception as exc:  # noqa: BLE001 - best effort, like collect(): say why, go on
        notes.append(f"live evidence failed: {type(exc).__name__}: {exc}")
    return ev
