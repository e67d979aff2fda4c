"""Reading /proc (Linux) for the supervisor: the main thread's kernel wait, a process's state,
name, command line, start time, CPU time, I/O counters, memory and descendants. Plain reads,
nothing cached; a file that cannot be read gives None (or a note), never an exception. The
supervisor needs no psutil: its values are psutil's where a caller depends on them (state
words); a start time is not (started(): after boot, not since the epoch, so that a clock set
forward or back leaves it as it was).

The one implementation (a Node job's evidence is read here too, through bridge/jobserve.py).
The sockets a thread waits on are in
bridge/sockets.py, the assembly of one look at a job in bridge/evidence.py.
"""

from __future__ import annotations

import os
import platform
from typing import Any, Optional

from trainbridge.bridge import proc_states

# Syscall numbers of the waits that matter, per architecture (from the kernel's unistd
# tables). Anything else is reported by number.
SYSCALLS = {
    "x86_64": {
        0: "read",
        1: "write",
        7: "poll",
        17: "pread64",
        18: "pwrite64",
        19: "readv",
        20: "writev",
        23: "select",
        34: "pause",
        35: "nanosleep",
        42: "connect",
        43: "accept",
        44: "sendto",
        45: "recvfrom",
        46: "sendmsg",
        47: "recvmsg",
        61: "wait4",
        74: "fsync",
        75: "fdatasync",
        202: "futex",
        230: "clock_nanosleep",
        232: "epoll_wait",
        247: "waitid",
        270: "pselect6",
        271: "ppoll",
        281: "epoll_pwait",
        288: "accept4",
        299: "recvmmsg",
        441: "epoll_pwait2",
        449: "futex_waitv",
    },
    "aarch64": {
        22: "epoll_pwait",
        63: "read",
        64: "write",
        65: "readv",
        66: "writev",
        67: "pread64",
        68: "pwrite64",
        72: "pselect6",
        73: "ppoll",
        82: "fsync",
        83: "fdatasync",
        95: "waitid",
        98: "futex",
        101: "nanosleep",
        115: "clock_nanosleep",
        202: "accept",
        203: "connect",
        206: "sendto",
        207: "recvfrom",
        211: "sendmsg",
        212: "recvmsg",
        242: "accept4",
        243: "recvmmsg",
        260: "wait4",
        441: "epoll_pwait2",
        449: "futex_waitv",
    },
}
# Syscalls whose first argument is the file descriptor being waited on.
FD_SYSCALLS = frozenset(
    {
        "read",
        "write",
        "pread64",
        "pwrite64",
        "readv",
        "writev",
        "connect",
        "accept",
        "accept4",
        "sendto",
        "recvfrom",
        "sendmsg",
        "recvmsg",
        "recvmmsg",
        "fsync",
        "fdatasync",
    }
)


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # stat's time unit
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096  # statm's unit


def read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def read_text(path: str) -> Optional[str]:
    """A file that may hold any bytes (a command line, a process name), decoded as UTF-8 with
    replacement characters; None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def syscall_name(number: int, machine: Optional[str] = None) -> str:
    table = SYSCALLS.get(machine or platform.machine(), {})
    return table.get(number, f"syscall_{number}")


def parse_syscall_line(text: Optional[str], machine: Optional[str] = None) -> dict[str, Any]:
    """/proc/<pid>/task/<tid>/syscall: 'nr arg0 .. arg5 sp pc', 'running' or '-1 sp pc'."""
    if not text:
        return {}
    parts = text.split()
    if not parts:
        return {}
    if parts[0] == "running":
        return {"syscall": "running"}
    try:
        number = int(parts[0])
    except ValueError:
        return {"syscall": parts[0]}
    if number < 0:
        return {"syscall": "none"}  # blocked, but not in a syscall (e.g. a page fault)
    name = syscall_name(number, machine)
    out: dict[str, Any] = {"syscall": name, "syscall_nr": number}
    if name in FD_SYSCALLS and len(parts) > 1:
        try:
            out["fd"] = int(parts[1], 16)
        except ValueError:
            pass
    return out


def main_thread(pid: int, notes: list[str]) -> dict[str, Any]:
    """The main thread's kernel wait now: {tid, wchan, syscall, syscall_nr, fd, fd_target,
    state}, each as far as readable; what is not readable becomes a note."""
    base = f"/proc/{pid}/task/{pid}"
    info: dict[str, Any] = {"tid": pid}
    wchan = read(f"{base}/wchan")
    if wchan is None:
        notes.append("wchan not readable")
    else:
        info["wchan"] = wchan.strip() if wchan.strip() not in ("", "0") else None
    syscall = read(f"{base}/syscall")
    if syscall is None:
        notes.append("syscall not readable (needs ptrace access to the process)")
    else:
        info.update(parse_syscall_line(syscall))
    stat = read(f"{base}/stat")
    if stat and ")" in stat:
        info["state"] = stat.rsplit(")", 1)[1].split()[0]
    if "fd" in info:
        try:
            info["fd_target"] = os.readlink(f"/proc/{pid}/fd/{info['fd']}")
        except OSError:
            pass
    return info


def main_thread_sample(pid: int) -> Optional[dict[str, str]]:
    """One sample of the main thread: {state, wait}: its state letter (R, S, D, ...) and its
    kernel wait (its wchan; "running" for R, "unknown" when unreadable), or None when the
    process is gone. The evidence counts these over a window (bridge/evidence.py)."""
    base = f"/proc/{pid}/task/{pid}"
    stat = read(f"{base}/stat")
    if not stat or ")" not in stat:
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    wait = "running" if state == "R" else ((read(f"{base}/wchan") or "").strip() or "unknown")
    return {"state": state, "wait": wait}


def process_facts(pid: int) -> dict[str, Any]:
    """{"cmd": its command line (300 characters at most), "state": its state word}: who a
    process is, for a verdict that names the other end of a wait."""
    raw = read(f"/proc/{pid}/cmdline")
    stat = read(f"/proc/{pid}/stat")
    state = stat.rsplit(")", 1)[1].split()[0] if stat and ")" in stat else None
    return {
        "cmd": " ".join(raw.rstrip("\0").split("\0"))[:300] if raw else None,
        "state": proc_states.word(state) if state else None,
    }


def stat_fields(pid: int) -> Optional[list[str]]:
    """/proc/<pid>/stat's fields after the command name (state first), or None."""
    stat = read(f"/proc/{pid}/stat")
    return stat.rsplit(")", 1)[1].split() if stat and ")" in stat else None


def start_ticks(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): only
    its order matters (DataLoader workers start in worker-id order)."""
    stat = read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(")", 1)[1].split()[19]) if stat else None
    except (IndexError, ValueError):
        return None


def state_word(pid: int) -> Optional[str]:
    """The process's state as a word (proc_states: "sleeping", "zombie", ...), or None once
    it is gone."""
    fields = stat_fields(pid)
    return proc_states.word(fields[0]) if fields else None


def process_name(pid: int) -> Optional[str]:
    """The process's name as psutil gives it: its comm (the kernel keeps 15 characters), or
    the program's name from its command line when the comm is the start of it
    ("gnome-keyring-daemon", not "gnome-keyring-d"). None once it is gone."""
    stat = read_text(f"/proc/{pid}/stat")
    if not stat or "(" not in stat or ")" not in stat:
        return None
    name = stat[stat.find("(") + 1 : stat.rfind(")")]
    if len(name) >= 15:
        args = cmdline(pid)
        if args:
            full = os.path.basename(args[0])
            if full.startswith(name):
                return full
    return name


def cmdline(pid: int) -> Optional[list[str]]:
    """The process's arguments from /proc/<pid>/cmdline ([] for a zombie or a kernel thread),
    or None once it is gone. A process that rewrote its title with spaces instead of NULs
    (setproctitle) is split on the spaces, as psutil does."""
    data = read_text(f"/proc/{pid}/cmdline")
    if data is None:
        return None
    if not data:
        return []
    sep = "\0" if data.endswith("\0") else " "
    data = data.removesuffix(sep)
    args = data.split(sep)
    if sep == "\0" and len(args) == 1 and " " in data:
        args = data.split(" ")
    return args


def cpu_seconds(pid: int) -> Optional[float]:
    """CPU seconds the process has used, user plus system (/proc/<pid>/stat utime + stime, in
    clock ticks), or None once it is gone. Its threads' time is included; its children's
    only once they are reaped, so a tree's CPU is the sum over its processes."""
    return _cpu_of(stat_fields(pid))


def _cpu_of(fields: Optional[list[str]]) -> Optional[float]:
    """utime + stime of stat_fields() in seconds, or None."""
    try:
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK if fields else None
    except (IndexError, ValueError):
        return None


def num_threads(pid: int) -> Optional[int]:
    """How many threads the process has (/proc/<pid>/stat field 20), or None once gone."""
    fields = stat_fields(pid)
    try:
        return int(fields[17]) if fields else None
    except (IndexError, ValueError):
        return None


def rss_bytes(pid: int) -> Optional[int]:
    """The process's resident memory in bytes (/proc/<pid>/statm's second field, in pages, as
    psutil's memory_info().rss), or None once it is gone."""
    fields = (read(f"/proc/{pid}/statm") or "").split()
    try:
        return int(fields[1]) * _PAGE
    except (IndexError, ValueError):
        return None


def io_counters(pid: int) -> Optional[dict[str, int]]:
    """The process's I/O so far from /proc/<pid>/io: read_bytes and write_bytes (what reached
    storage) and rchar and wchar (every read and write: files, pipes, sockets). None when it
    cannot be read: another user's process (it needs ptrace access), or one that is gone."""
    text = read(f"/proc/{pid}/io")
    if not text:
        return None
    counters = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if value.strip().isdigit():
            counters[name.strip()] = int(value)
    if "read_bytes" not in counters or "write_bytes" not in counters:
        return None
    return {
        "read_bytes": counters["read_bytes"],
        "write_bytes": counters["write_bytes"],
        "rchar": counters.get("rchar", 0),
        "wchar": counters.get("wchar", 0),
    }


def boot_time() -> Optional[float]:
    """When the machine booted, in seconds since the epoch (/proc/stat's btime), or None. It
    moves with the wall clock (the clock set by NTP at wake, a VM restored): never part of a
    process's identity (started())."""
    for line in (read("/proc/stat") or "").splitlines():
        if line.startswith("btime"):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def boot_id() -> Optional[str]:
    """This boot's random id (/proc/sys/kernel/random/boot_id), or None: a start time after
    boot names a process only on the boot it was read on."""
    text = (read("/proc/sys/kernel/random/boot_id") or "").strip()
    return text or None


def started(pid: int) -> Optional[float]:
    """When the process started, in seconds after the machine booted (/proc/<pid>/stat field
    22 over the clock tick). With the pid it names one process (pid reuse), on this boot.
    Not psutil's create_time(), which adds /proc/stat's btime: that moves when the wall clock
    is set, and a process that still ran then looked like another (a clock step made a
    running job's keeper "gone" and its training process "crashed"). Zombies included; None
    once it is gone."""
    ticks = start_ticks(pid)
    return None if ticks is None else ticks / _CLK_TCK


def running_since(pid: int) -> Optional[float]:
    """started() of a process that still runs: None once it is gone or a zombie (its parent
    has not reaped it yet, but it runs no more)."""
    fields = stat_fields(pid)
    if fields is None or fields[0] == "Z":
        return None
    try:
        return int(fields[19]) / _CLK_TCK
    except (IndexError, ValueError):
        return None


def all_descendants(pid: int) -> list[int]:
    """Every process below pid, children first, then theirs (what psutil's
    children(recursive=True) finds), from one read of every /proc/<pid>/stat: complete, where
    /proc/<pid>/task/*/children (descendants(), tree_pids()) is not promised to be, and
    with zombies (a child that ended unreaped is evidence too). A pid that started before
    pid did is another process that reused a parent's pid, not a descendant."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    root_start = start_ticks(pid)
    by_parent: dict[int, list[tuple[int, int]]] = {}
    for name in names:
        if not name.isdigit():
            continue
        fields = stat_fields(int(name))
        if fields is None or len(fields) < 20:
            continue  # gone
        try:
            by_parent.setdefault(int(fields[1]), []).append((int(name), int(fields[19])))
        except ValueError:
            continue
    out: list[int] = []
    seen = {pid}
    queue = [pid]
    for parent in queue:  # grows while walked: every descendant
        for child, started in by_parent.get(parent, ()):
            if child in seen or (root_start is not None and started < root_start):
                continue
            seen.add(child)
            out.append(child)
            queue.append(child)
    return out


def catches(pid: int, signum: int) -> bool:
    """Whether `pid` has a handler for signum (/proc/<pid>/status SigCgt)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signum - 1)))
    except (OSError, ValueError, IndexError):
        pass
    return False


def forked_copies(parents: list[int], signum: int, exclude: set[int]) -> list[int]:
    """The children of `parents` that fork() copied from them and that still have a
    handler for signum (the one they inherited): a torch DataLoader's or a multiprocessing
    pool's fork workers, which keep their parent's command line and never say hello (the
    worker's beacon thread does not survive a fork). `exclude`: the pids that said hello,
    which are asked the usual way."""
    if not parents:
        return []
    out = []
    lines = {parent: cmdline(parent) for parent in parents}
    for pid in sorted(descendants(parents) or ()):
        fields = stat_fields(pid)
        if pid in exclude or fields is None or len(fields) < 2:
            continue
        parent = int(fields[1])
        if parent in lines and lines[parent] and cmdline(pid) == lines[parent]:
            if catches(pid, signum):
                out.append(pid)
    return out


_CHILDREN: Optional[bool] = None  # whether this kernel has /proc/<pid>/task/<tid>/children


def descendants(roots: list[int]) -> Optional[set[int]]:
    """Every process below `roots` (not the roots themselves), from each one's
    /proc/<pid>/task/*/children: reads only these processes' files, never all of /proc,
    so a machine with many processes (200 keepers and their jobs) costs each caller only
    its own tree. None where the kernel has no such file (CONFIG_PROC_CHILDREN)."""
    global _CHILDREN
    if _CHILDREN is None:
        _CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")
    if not _CHILDREN:
        return None
    found: set[int] = set()
    queue = list(roots)
    seen = set(roots)
    while queue:
        parent = queue.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # gone
        for tid in tasks:
            for child in (read(f"/proc/{parent}/task/{tid}/children") or "").split():
                pid = int(child)
                if pid not in seen:
                    seen.add(pid)
                    found.add(pid)
                    queue.append(pid)
    return found


def tree_pids(pid: int, limit: int = 200) -> list[int]:
    """The job's descendants from /proc/<pid>/task/*/children (no scan of all of /proc)."""
    out: list[int] = []
    queue = [pid]
    while queue and len(out) < limit:
        parent = queue.pop(0)
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            for child in (read(f"/proc/{parent}/task/{tid}/children") or "").split():
                if child.isdigit() and int(child) not in out:
                    out.append(int(child))
                    queue.append(int(child))
    return out[:limit]


def threads(pid: int) -> Optional[list[list[Any]]]:
    """The process's threads as bridge/look.py weighs their waits for a CPU, each
    [tid, state, run_delay_s, timeslices]: its state letter now (R: on a CPU or queued for
    one), the seconds it has waited on a CPU run queue and the timeslices it has run so far
    (/proc/<pid>/task/*/stat, and the second and third fields of schedstat). None once the
    process is gone or where the kernel has no schedstat."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out: list[list[Any]] = []
    for tid in tids:
        stat = read(f"/proc/{pid}/task/{tid}/stat")
        fields = (read(f"/proc/{pid}/task/{tid}/schedstat") or "").split()
        if not (stat and ")" in stat):
            continue  # the thread ended between the listing and the read
        if len(fields) < 3 or not (fields[1].isdigit() and fields[2].isdigit()):
            return None
        state = stat.rsplit(")", 1)[1].split()[:1] or ["?"]
        out.append([int(tid), state[0], round(int(fields[1]) / 1e9, 6), int(fields[2])])
    return out


# Where a cgroup's CPU statistics are, and the key and unit of its time throttled by its
# CPU quota: cgroup v2's unified tree (cpu.stat throttled_usec), v1's cpu controller
# (cpu.stat throttled_time, nanoseconds) at its usual mount points.
CGROUP_V2 = "/sys/fs/cgroup"
CGROUP_V1_CPU = ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu")


def cpu_throttled(pid: int) -> Optional[dict[str, float]]:
    """Seconds each cgroup that holds the process (its own and each ancestor: a container's
    limit is often set above the process's own cgroup) has been held back by its CPU quota so
    far, by the cgroup's folder (/sys/fs/cgroup/...), summed over CPUs as the kernel counts
    it. Only the cgroups whose statistics say it (a quota's controller on); None when
    /proc/<pid>/cgroup cannot be read (gone, or another user's in a hardened /proc)."""
    listing = read(f"/proc/{pid}/cgroup")
    if listing is None:
        return None
    places = []  # (mount point, path, key, seconds per unit)
    for line in listing.splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            places.append((CGROUP_V2, path, "throttled_usec", 1e-6))
        elif "cpu" in controllers.split(","):
            for mount in CGROUP_V1_CPU:
                if os.path.isdir(mount):
                    places.append((mount, path, "throttled_time", 1e-9))
                    break
    out: dict[str, float] = {}
    for mount, path, key, unit in places:
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts), -1, -1):
            here = os.path.join(mount, *parts[:depth])
            for row in (read(os.path.join(here, "cpu.stat")) or "").splitlines():
                name, _, value = row.partition(" ")
                if name == key and value.strip().isdigit():
                    out[here] = round(int(value) * unit, 6)
    return out


def process_sample(pid: int) -> Optional[dict[str, Any]]:
    """One process for bridge/look.py: its program's name (the executable's, else comm), CPU
    seconds used, bytes read and written (rchar + wchar: files, pipes and sockets; None when
    /proc/<pid>/io cannot be read), and its threads' states, waits for a CPU and timeslices
    (threads), and the time its cgroups have held it back by their CPU quota (throttled, by
    cgroup path: cpu_throttled). None once it is gone (or a zombie)."""
    fields = stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    try:
        name = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        name = (read(f"/proc/{pid}/comm") or "").strip()
    io = io_counters(pid)
    return {
        "pid": pid,
        "name": name.removesuffix(" (deleted)"),
        "cpu_s": round(_cpu_of(fields) or 0.0, 3),
        "io_bytes": io["rchar"] + io["wchar"] if io else None,
        "threads": threads(pid),
        "throttled": cpu_throttled(pid),
    }


def tree_sample(pid: int, lines: int, t: float, lead: Optional[int] = None) -> dict[str, Any]:
    """The job's tree now, as bridge/look.py judges it: {t, lines, lead, procs}."""
    procs = [process_sample(p) for p in [pid, *tree_pids(pid)]]
    return {
        "t": t,
        "lines": lines,
        "lead": pid if lead is None else lead,
        "procs": [p for p in procs if p is not None],
    }
