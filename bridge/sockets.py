"""The sockets a job's processes hold, for the evidence about a wait (Linux): TCP and UDP
sockets with their remote ends, and for a wait on an AF_UNIX socket the process at its other
end. Read from /proc: a process's socket inodes from its fd links, their addresses from its
network namespace's tables (/proc/<pid>/net/tcp, tcp6, udp, udp6). Never raises: what cannot
be read is None or a note.

The one implementation (a Node job's evidence is read here too, through bridge/jobserve.py).
"""

from __future__ import annotations

import os
import re
import socket
import struct
from typing import Any, Optional

from trainbridge.bridge import procfs

# A read on socket:[N] is not a network wait when N is an AF_UNIX socket: socketpairs and
# multiprocessing connections (a DataLoader worker, torch's fd sharing) end in another
# process, often one of the job's own. /proc/net/unix tells the family; the peer's inode
# comes from the kernel's sock_diag netlink (what `ss -x` shows); the process that holds the
# peer is found through /proc/<pid>/fd of the job's processes.
SOCKET_TARGET = re.compile(r"^socket:\[(\d+)\]$")
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _UDIAG_SHOW_PEER, _UNIX_DIAG_PEER = 4, 20, 0x4, 2


def unix_socket_inodes(pid: int) -> Optional[set[int]]:
    """Inodes of the AF_UNIX sockets in pid's network namespace, or None if unreadable."""
    text = procfs.read(f"/proc/{pid}/net/unix")
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
    m = SOCKET_TARGET.match(str(main.get("fd_target") or ""))
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


# /proc/net/tcp's state column as a word (include/net/tcp_states.h); UDP sockets have none.
TCP_STATES = {
    "01": "ESTABLISHED",
    "02": "SYN_SENT",
    "03": "SYN_RECV",
    "04": "FIN_WAIT1",
    "05": "FIN_WAIT2",
    "06": "TIME_WAIT",
    "07": "CLOSE",
    "08": "CLOSE_WAIT",
    "09": "LAST_ACK",
    "0A": "LISTEN",
    "0B": "CLOSING",
}
# The tables of a network namespace: (file, family, type)
INET_TABLES = (
    ("tcp", socket.AF_INET, "tcp"),
    ("tcp6", socket.AF_INET6, "tcp"),
    ("udp", socket.AF_INET, "udp"),
    ("udp6", socket.AF_INET6, "udp"),
)


def decode_address(text: str, family: int) -> Optional[list[Any]]:
    """An address of /proc/net/tcp ("0100007F:1F90": the IP as 32-bit words in the host's
    byte order, the port in hex) as [ip, port], the IP as inet_ntop writes it
    ("127.0.0.1", "::1", "::ffff:127.0.0.1"); None for port 0 (no address: a listening or
    unconnected socket's remote end)."""
    host, _, port_hex = text.partition(":")
    try:
        port = int(port_hex, 16)
        if not port:
            return None
        # each 32-bit word is printed as a number that the host stores in its own byte order
        words = struct.unpack(f"={len(host) // 8}I", bytes.fromhex(host))
        return [socket.inet_ntop(family, struct.pack(f">{len(words)}I", *words)), port]
    except (OSError, ValueError, struct.error):
        return None


def inet_table(net_dir: str, kinds: tuple[str, ...] = ("tcp", "udp")) -> dict[int, dict[str, Any]]:
    """The TCP and UDP sockets of one network namespace (net_dir: /proc/<pid>/net), in the
    tables' order: {inode: {type, laddr, raddr, status}}. A table that cannot be read (no
    IPv6) is left out."""
    rows: dict[int, dict[str, Any]] = {}
    for name, family, kind in INET_TABLES:
        if kind not in kinds:
            continue
        text = procfs.read(f"{net_dir}/{name}")
        for line in (text or "").splitlines()[1:]:
            f = line.split()
            if len(f) < 10 or not f[9].isdigit():
                continue
            rows[int(f[9])] = {
                "type": kind,
                "laddr": decode_address(f[1], family),
                "raddr": decode_address(f[2], family),
                "status": TCP_STATES.get(f[3], f[3]) if kind == "tcp" else "NONE",
            }
    return rows


def socket_fds(pid: int) -> dict[int, int]:
    """{inode: fd} of the sockets pid holds open (its fd links to socket:[inode]); the lowest
    listed fd when it holds one socket twice. Raises OSError when its fds cannot be listed
    (another user's process, or gone): the caller says so."""
    out: dict[int, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            m = SOCKET_TARGET.match(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue  # closed meanwhile
        if m:
            out.setdefault(int(m.group(1)), int(fd))
    return out


def _net_dir_key(pid: int) -> str:
    """Which network namespace pid is in (processes in one share its tables)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return f"pid {pid}"


def inet_sockets(pids: list[int], notes: list[str]) -> list[dict[str, Any]]:
    """The TCP and UDP sockets the processes `pids` hold: {pid, fd, type, laddr, raddr,
    status} each. Each network namespace's tables are read once."""
    out: list[dict[str, Any]] = []
    tables: dict[str, dict[int, dict[str, Any]]] = {}
    for pid in pids:
        try:
            fds = socket_fds(pid)
        except OSError as exc:
            notes.append(f"sockets of {pid} not readable ({type(exc).__name__})")
            continue
        if not fds:
            continue
        key = _net_dir_key(pid)
        if key not in tables:
            tables[key] = inet_table(f"/proc/{pid}/net")
        for inode, row in tables[key].items():
            if inode in fds:
                out.append({"pid": pid, "fd": fds[inode], **row})
    return out


def _loopback(host: Any) -> bool:
    h = str(host)
    return h.startswith("127.") or h == "::1" or h.startswith("::ffff:127.")


def add_loopback_peers(
    sockets: list[dict[str, Any]], job_pids: list[int], notes: list[str]
) -> None:
    """For each connected TCP socket of the job whose other end is on this machine (a
    loopback address), the process that holds that end: sock["peer"] = {"pid", "cmd",
    "state", "in_job"} (so a local server that does not answer is named, not
    only its port). The other end's row is in the same namespace's TCP table, its holder
    found through every process's fd links: done only when there is such a socket."""
    local = [
        s
        for s in sockets
        if s.get("type") == "tcp" and s.get("raddr") and s.get("laddr") and _loopback(s["raddr"][0])
    ]
    if not local:
        return
    try:
        pids = sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError as exc:
        notes.append(f"the machine's processes not readable ({type(exc).__name__})")
        return
    tables: dict[str, dict[int, dict[str, Any]]] = {}
    for sock in local:
        key = _net_dir_key(sock["pid"])
        if key not in tables:  # the namespace its other end is in
            tables[key] = inet_table(f"/proc/{sock['pid']}/net", ("tcp",))
        ends = [
            inode
            for inode, row in tables[key].items()
            if row["laddr"] == list(sock["raddr"]) and row["raddr"] == list(sock["laddr"])
        ]
        owner = socket_owner(ends[0], pids) if ends else None
        if owner:
            pid = owner["pid"]
            sock["peer"] = {"pid": pid, **procfs.process_facts(pid), "in_job": pid in job_pids}
        elif ends:  # another user's process: its sockets are not ours to read
            notes.append(f"the process at the other end of {sock['raddr']} is not readable")
