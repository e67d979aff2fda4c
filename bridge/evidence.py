"""Evidence about a live job, gathered from the OS (the seeds' layer 1: judge the blocking
direction from outside).

collect(pid) looks at the job's process tree over a short window: the main thread's kernel
wait (/proc/<pid>/task/<pid>/wchan and syscall, and what the syscall's fd points at), the
process state, CPU and I/O deltas, open TCP/UDP sockets with their remote ends, child
processes and their states, the GPU through pynvml when there is one, and a py-spy dump when
py-spy is installed. It is bounded in time and never raises: what could not be read becomes
a note. The rules that judge this evidence live in bridge/diagnosis_hang.py.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import struct
import subprocess
import time
from typing import Any, Optional

import psutil

# Syscall numbers of the waits that matter, per architecture (from the kernel's unistd
# tables). Anything else is reported by number.
_SYSCALLS = {
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
_FD_SYSCALLS = frozenset(
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
_STATE_LETTERS = {
    "R": "running",
    "S": "sleeping",
    "D": "disk-sleep",
    "T": "stopped",
    "t": "tracing-stop",
    "Z": "zombie",
    "X": "dead",
    "I": "idle",
}
PY_SPY_TIMEOUT_S = 0.25  # on top of the window, so collect() stays bounded

_gpu_unavailable: Optional[str] = None  # cached: pynvml's answer does not change in a run


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def syscall_name(number: int, machine: Optional[str] = None) -> str:
    table = _SYSCALLS.get(machine or platform.machine(), {})
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
    if name in _FD_SYSCALLS and len(parts) > 1:
        try:
            out["fd"] = int(parts[1], 16)
        except ValueError:
            pass
    return out


def _main_thread(pid: int, notes: list[str]) -> dict[str, Any]:
    base = f"/proc/{pid}/task/{pid}"
    info: dict[str, Any] = {"tid": pid}
    wchan = _read(f"{base}/wchan")
    if wchan is None:
        notes.append("wchan not readable")
    else:
        info["wchan"] = wchan.strip() if wchan.strip() not in ("", "0") else None
    syscall = _read(f"{base}/syscall")
    if syscall is None:
        notes.append("syscall not readable (needs ptrace access to the process)")
    else:
        info.update(parse_syscall_line(syscall))
    stat = _read(f"{base}/stat")
    if stat and ")" in stat:
        info["state"] = stat.rsplit(")", 1)[1].split()[0]
    if "fd" in info:
        try:
            info["fd_target"] = os.readlink(f"/proc/{pid}/fd/{info['fd']}")
        except OSError:
            pass
    return info


# --- local (AF_UNIX) sockets ------------------------------------------------------------
# A read on socket:[N] is not a network wait when N is an AF_UNIX socket: socketpairs and
# multiprocessing connections (a DataLoader worker, torch's fd sharing) end in another
# process, often one of the job's own. /proc/net/unix tells the family; the peer's inode
# comes from the kernel's sock_diag netlink (what `ss -x` shows); the process that holds the
# peer is found through /proc/<pid>/fd of the job's processes.
_SOCKET_TARGET = re.compile(r"^socket:\[(\d+)\]$")
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _UDIAG_SHOW_PEER, _UNIX_DIAG_PEER = 4, 20, 0x4, 2


def unix_socket_inodes(pid: int) -> Optional[set]:
    """Inodes of the AF_UNIX sockets in pid's network namespace, or None if unreadable."""
    text = _read(f"/proc/{pid}/net/unix")
    if text is None:
        return None
    return {
        int(parts[6])
        for parts in (line.split() for line in text.splitlines()[1:])
        if len(parts) >= 7 and parts[6].isdigit()
    }


def unix_peer_inode(inode: int) -> Optional[int]:
    """The inode of the other end of the AF_UNIX socket `inode` (sock_diag), or None."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
    except (OSError, AttributeError):
        return None
    try:
        sock.settimeout(0.2)
        # unix_diag_req: family, protocol, pad, states, ino, show, cookie (~0: no cookie)
        req = struct.pack(
            "=BBHIII2I",
            socket.AF_UNIX,
            0,
            0,
            0xFFFFFFFF,
            inode,
            _UDIAG_SHOW_PEER,
            0xFFFFFFFF,
            0xFFFFFFFF,
        )
        sock.send(struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY, 1, 1, 0) + req)
        data = sock.recv(65536)
    except OSError:
        return None
    finally:
        sock.close()
    if len(data) < 32:
        return None
    length, kind = struct.unpack_from("=IH", data, 0)
    if kind != _SOCK_DIAG_BY_FAMILY:
        return None
    offset, end = 16 + 16, min(length, len(data))  # nlmsghdr, unix_diag_msg
    while offset + 4 <= end:
        alen, atype = struct.unpack_from("=HH", data, offset)
        if alen < 4:
            break
        if atype == _UNIX_DIAG_PEER and alen >= 8:
            peer = struct.unpack_from("=I", data, offset + 4)[0]
            return peer or None
        offset += (alen + 3) & ~3
    return None


def socket_owner(inode: int, pids: list[int]) -> Optional[dict[str, int]]:
    """The first of `pids` that holds socket:[inode] open, as {pid, fd}."""
    target = f"socket:[{inode}]"
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return {"pid": pid, "fd": int(fd)}
            except (OSError, ValueError):
                continue
    return None


def local_peer(pid: int, main: dict[str, Any], job_pids: list[int]) -> Optional[dict[str, Any]]:
    """Marks main["fd_family"] = "unix" when the main thread waits on an AF_UNIX socket and
    returns {inode, peer_inode, pid, fd} (pid None when the peer is not a job process)."""
    m = _SOCKET_TARGET.match(str(main.get("fd_target") or ""))
    if not m:
        return None
    inode = int(m.group(1))
    inodes = unix_socket_inodes(pid)
    if not inodes or inode not in inodes:
        return None
    main["fd_family"] = "unix"
    peer = unix_peer_inode(inode)
    owner = socket_owner(peer, [p for p in job_pids if p != pid] + [pid]) if peer else None
    return {
        "inode": inode,
        "peer_inode": peer,
        "pid": (owner or {}).get("pid"),
        "fd": (owner or {}).get("fd"),
    }


STATE_SAMPLE_S = 0.02


def _sample_main(pid: int, until: float) -> tuple[Optional[float], dict[str, int]]:
    """Over the window, until `until`: the fraction of samples in which the main thread was
    runnable (R), and how many samples saw it in each kernel wait (its wchan; "running" for
    R). The rules judge by these counts, not by one read at the end that may catch a
    sleeping loop between two sleeps (issue 20: margins against sampling jitter)."""
    base = f"/proc/{pid}/task/{pid}"
    seen = running = 0
    waits: dict[str, int] = {}
    while True:
        stat = _read(f"{base}/stat")
        if stat and ")" in stat:
            seen += 1
            state = stat.rsplit(")", 1)[1].split()[0]
            running += state == "R"
            wchan = (
                "running" if state == "R" else ((_read(f"{base}/wchan") or "").strip() or "unknown")
            )
            waits[wchan] = waits.get(wchan, 0) + 1
        left = until - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(STATE_SAMPLE_S, left))
    return (round(running / seen, 3) if seen else None), waits


def _cpu_s(procs: list[psutil.Process]) -> dict[int, float]:
    out = {}
    for p in procs:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except (psutil.Error, OSError):
            pass
    return out


def _io(proc: psutil.Process) -> Optional[dict[str, int]]:
    try:
        c = proc.io_counters()
    except (psutil.Error, OSError, AttributeError):
        return None
    return {
        "read_bytes": c.read_bytes,
        "write_bytes": c.write_bytes,
        "rchar": getattr(c, "read_chars", 0),
        "wchar": getattr(c, "write_chars", 0),
    }


def _sockets(procs: list[psutil.Process], notes: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in procs:
        try:
            conns = p.net_connections(kind="inet")
        except (psutil.Error, OSError) as exc:
            notes.append(f"sockets of {p.pid} not readable ({type(exc).__name__})")
            continue
        for c in conns:
            out.append(
                {
                    "pid": p.pid,
                    "fd": c.fd if c.fd >= 0 else None,
                    "type": "tcp" if c.type == 1 else "udp",
                    "laddr": list(c.laddr) if c.laddr else None,
                    "raddr": list(c.raddr) if c.raddr else None,
                    "status": c.status,
                }
            )
    return out


def _start_ticks(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): only
    its order matters (DataLoader workers start in worker-id order)."""
    stat = _read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(")", 1)[1].split()[19]) if stat else None
    except (IndexError, ValueError):
        return None


def _children(
    proc: psutil.Process, cpu0: dict[int, float], cpu1: dict[int, float], window: float
) -> list[dict[str, Any]]:
    out = []
    try:
        kids = proc.children(recursive=True)
    except (psutil.Error, OSError):
        return out
    for k in kids:
        entry: dict[str, Any] = {"pid": k.pid}
        try:
            with k.oneshot():
                entry.update(
                    name=k.name(),
                    status=k.status(),
                    ppid=k.ppid(),
                    cmdline=" ".join(k.cmdline())[:200],
                    started=_start_ticks(k.pid),
                )
        except (psutil.Error, OSError):
            entry.setdefault("status", "gone")
        if k.pid in cpu0 and k.pid in cpu1 and window > 0:
            entry["cpu_fraction"] = round((cpu1[k.pid] - cpu0[k.pid]) / window, 3)
        wchan = _read(f"/proc/{k.pid}/wchan")
        if wchan:
            entry["wchan"] = wchan.strip() or None
        out.append(entry)
    return out


def gpu_facts(pids: Optional[list[int]] = None) -> dict[str, Any]:
    """GPU utilisation and memory per device via pynvml, or a clear note why there is none."""
    global _gpu_unavailable
    if _gpu_unavailable is not None:
        return {"gpu": None, "gpu_note": _gpu_unavailable}
    try:
        import pynvml  # nvidia-ml-py; imported lazily so a missing driver costs nothing

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ImportError...
        _gpu_unavailable = f"no NVIDIA GPU (pynvml: {type(exc).__name__}: {exc})"
        return {"gpu": None, "gpu_note": _gpu_unavailable}
    devices = []
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            util = pynvml.nvmlDeviceGetUtilizationRates(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            entry = {
                "index": i,
                "util_percent": util.gpu,
                "mem_used": mem.used,
                "mem_total": mem.total,
            }
            try:
                name = pynvml.nvmlDeviceGetName(h)
                entry["name"] = name.decode() if isinstance(name, bytes) else name
            except Exception:  # noqa: BLE001 - the name is optional in the snapshot
                pass
            if pids is not None:
                try:
                    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                    entry["used_by_job"] = any(p.pid in pids for p in procs)
                except Exception:  # noqa: BLE001 - not supported on every GPU: used_by_job stays unknown
                    pass
            devices.append(entry)
    except Exception as exc:  # noqa: BLE001 - NVML failed mid-read: keep what was read, say why
        return {"gpu": devices or None, "gpu_note": f"pynvml failed: {type(exc).__name__}: {exc}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - best effort: the readings are taken
            pass
    if not devices:
        return {"gpu": None, "gpu_note": "no NVIDIA GPU (pynvml: 0 devices)"}
    return {"gpu": devices, "gpu_note": None}


def _start_py_spy(pid: int) -> Optional[subprocess.Popen]:
    exe = shutil.which("py-spy")
    if not exe:
        return None
    try:
        return subprocess.Popen(
            [exe, "dump", "--pid", str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    except OSError:
        return None


def _finish_py_spy(
    proc: Optional[subprocess.Popen], deadline: float, notes: list[str]
) -> Optional[str]:
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=max(0.01, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        notes.append("py-spy dump timed out")
        return None
    text = out.decode("utf-8", "replace")
    if proc.returncode != 0:
        notes.append(f"py-spy dump failed: {text.strip()[:200]}")
        return None
    return text


def collect(pid: int, window_s: float = 0.5) -> dict[str, Any]:
    """Evidence about the job whose main process is `pid`; never raises.

    Takes about window_s (CPU/I/O deltas are measured over it) plus a little reading."""
    notes: list[str] = []
    ev: dict[str, Any] = {"pid": pid, "window_s": window_s, "notes": notes}
    try:
        return _collect(pid, window_s, ev, notes)
    except Exception as exc:  # noqa: BLE001 - evidence is best effort: a bug here must not hide the job
        notes.append(f"evidence failed: {type(exc).__name__}: {exc}")
        return ev


def _collect(pid: int, window_s: float, ev: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    try:
        proc = psutil.Process(pid)
        ev["status"] = proc.status()
        ev["name"] = proc.name()
    except psutil.NoSuchProcess:
        ev["alive"] = False
        notes.append("process is gone")
        ev.update(gpu_facts())
        return ev
    except (psutil.Error, OSError) as exc:
        notes.append(f"process not readable: {type(exc).__name__}")
        ev["alive"] = True
        return ev
    ev["alive"] = ev["status"] != psutil.STATUS_ZOMBIE
    spy = _start_py_spy(pid)
    try:
        tree = [proc] + proc.children(recursive=True)
    except (psutil.Error, OSError):
        tree = [proc]
    t0 = time.monotonic()
    cpu0, io0 = _cpu_s(tree), _io(proc)
    # The window is a measurement interval, not synchronisation: deltas need two samples.
    # Meanwhile sample the main thread's state: on a loaded machine a spinning process gets
    # little CPU but is always runnable (R), which a sleeping one never is.
    runnable, waits = _sample_main(pid, t0 + max(0.0, window_s))
    cpu1, io1 = _cpu_s(tree), _io(proc)
    elapsed = max(1e-6, time.monotonic() - t0)
    ev["window_s"] = round(elapsed, 3)
    if pid in cpu0 and pid in cpu1:
        ev["cpu_fraction"] = round((cpu1[pid] - cpu0[pid]) / elapsed, 3)
    if io0 and io1:
        ev["io_delta"] = {k: io1[k] - io0[k] for k in io0}
    elif io0 is None:
        notes.append("I/O counters not readable")
    try:
        ev["status"] = proc.status()
    except psutil.NoSuchProcess:
        ev["alive"] = False
        notes.append("process ended during the window")
    ev["main_thread"] = _main_thread(pid, notes)
    if runnable is not None:
        ev["main_thread"]["runnable_fraction"] = runnable
        ev["main_thread"]["wait_samples"] = waits
    try:
        ev["threads"] = proc.num_threads()
        ev["rss_bytes"] = proc.memory_info().rss
    except (psutil.Error, OSError):
        pass
    ev["sockets"] = _sockets(tree, notes)
    ev["children"] = _children(proc, cpu0, cpu1, elapsed)
    peer = local_peer(pid, ev["main_thread"], [c["pid"] for c in ev["children"]])
    if peer:
        ev["unix_peer"] = peer
    from trainbridge.bridge import childstack  # the waited-on child's own stack

    childstack.add(ev["children"], (peer or {}).get("pid"), notes)
    ev.update(gpu_facts([p.pid for p in tree]))
    ev["py_spy"] = _finish_py_spy(spy, time.monotonic() + PY_SPY_TIMEOUT_S, notes)
    if spy is None:
        notes.append("py-spy not installed (optional)")
    return ev


# --- the kernel's OOM killer ------------------------------------------------------------
def _cgroup_dirs(pid: Optional[int]) -> list[str]:
    """Candidate memory cgroup directories of `pid` (v2 unified first, then v1)."""
    text = _read(f"/proc/{pid or 'self'}/cgroup") or ""
    dirs = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            dirs.append(("v2", "/sys/fs/cgroup" + path))
            dirs.append(("v2", "/sys/fs/cgroup/unified" + path))
        elif "memory" in controllers.split(","):
            dirs.append(("v1", "/sys/fs/cgroup/memory" + path))
    return [d for _, d in sorted(dirs, key=lambda x: x[0] != "v2")]


def oom_kill_count(pid: Optional[int] = None) -> Optional[int]:
    """The cgroup's count of processes the OOM killer has killed, or None if unreadable.

    Read it before launch and after exit: a rise while the job died of SIGKILL means the
    kernel killed it for memory. cgroup v2: memory.events; v1: memory.oom_control."""
    for d in _cgroup_dirs(pid):
        for name in ("memory.events", "memory.oom_control"):
            text = _read(os.path.join(d, name))
            if not text:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    try:
                        return int(value)
                    except ValueError:
                        return None
    return None


def oom_killed(before: Optional[int], after: Optional[int]) -> Optional[bool]:
    """Pure: did the OOM killer act between two readings? None when either is unknown."""
    if before is None or after is None:
        return None
    return after > before


# --- the live look while a job is stalled (issue 12 item 12) ----------------------------
def _stat_fields(pid: int) -> Optional[list[str]]:
    stat = _read(f"/proc/{pid}/stat")
    return stat.rsplit(")", 1)[1].split() if stat and ")" in stat else None


def _tree_pids(pid: int, limit: int = 200) -> list[int]:
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
            for child in (_read(f"/proc/{parent}/task/{tid}/children") or "").split():
                if child.isdigit() and int(child) not in out:
                    out.append(int(child))
                    queue.append(int(child))
    return out[:limit]


def live(pid: int, previous: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """A cheap look at a live job, for the diagnosis shown while it is stalled: no window
    (the CPU fraction is measured since `previous`, the "mark" of the last look), no py-spy,
    no GPU, and the socket the main thread waits on is looked up once per socket (the mark
    remembers it: reading every TCP socket of the machine is what costs). Never raises."""
    notes: list[str] = []
    ev: dict[str, Any] = {"pid": pid, "notes": notes, "live": True}
    previous = previous or {}
    try:
        fields = _stat_fields(pid)
        if fields is None:
            ev["alive"] = False
            return ev
        ticks = os.sysconf("SC_CLK_TCK")
        now = time.monotonic()
        cpu_s = (int(fields[11]) + int(fields[12])) / ticks
        ev["status"] = _STATE_LETTERS.get(fields[0], fields[0])
        ev["alive"] = fields[0] != "Z"
        mark: dict[str, Any] = {"t": now, "cpu_s": cpu_s}
        ev["mark"] = mark
        if previous.get("t") is not None and now - previous["t"] >= 0.2:
            ev["cpu_fraction"] = round((cpu_s - previous["cpu_s"]) / (now - previous["t"]), 3)
            ev["window_s"] = round(now - previous["t"], 3)
        main = _main_thread(pid, notes)
        ev["main_thread"] = main
        children = []
        for kid in _tree_pids(pid):
            kf = _stat_fields(kid)
            if kf is None:
                continue
            children.append(
                {
                    "pid": kid,
                    "name": (_read(f"/proc/{kid}/comm") or "").strip(),
                    "status": _STATE_LETTERS.get(kf[0], kf[0]),
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
                peer = local_peer(pid, main, [c["pid"] for c in children])
                if peer:
                    found = {"fd_family": "unix", "unix_peer": peer}
                else:
                    found = {"sockets": _sockets([psutil.Process(pid)], notes)}
            mark.update(socket=target, found=found)
            if "unix_peer" in found:
                ev["unix_peer"] = found["unix_peer"]
            if "sockets" in found:
                ev["sockets"] = found["sockets"]
        from trainbridge.bridge import childstack

        childstack.add(children, (ev.get("unix_peer") or {}).get("pid"), notes, py_spy=False)
    except Exception as exc:  # noqa: BLE001 - best effort, like collect(): say why, go on
        notes.append(f"live evidence failed: {type(exc).__name__}: {exc}")
    return ev
