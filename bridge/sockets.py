"""The sockets a job's processes hold, for the evidence about a wait (Linux): TCP and UDP
sockets with their remote ends, and for a wait on an AF_UNIX socket the process at its other
end. Never raises: what cannot be read is None or a note.

The Node twin is node-client/src/sockets.js.
"""

from __future__ import annotations

import os
import re
import socket
import struct
from typing import Any, Optional

import psutil

from trainbridge.bridge import procfs

# A read on socket:[N] is not a network wait when N is an AF_UNIX socket: socketpairs and
# multiprocessing connections (a DataLoader worker, torch's fd sharing) end in another
# process, often one of the job's own. /proc/net/unix tells the family; the peer's inode
# comes from the kernel's sock_diag netlink (what `ss -x` shows); the process that holds the
# peer is found through /proc/<pid>/fd of the job's processes.
SOCKET_TARGET = re.compile(r"^socket:\[(\d+)\]$")
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _UDIAG_SHOW_PEER, _UNIX_DIAG_PEER = 4, 20, 0x4, 2


def unix_socket_inodes(pid: int) -> Optional[set]:
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


def inet_sockets(procs: list[psutil.Process], notes: list[str]) -> list[dict[str, Any]]:
    """The TCP and UDP sockets `procs` hold: {pid, fd, type, laddr, raddr, status} each."""
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


def _loopback(host: Any) -> bool:
    h = str(host)
    return h.startswith("127.") or h == "::1" or h.startswith("::ffff:127.")


def add_loopback_peers(
    sockets: list[dict[str, Any]], job_pids: list[int], notes: list[str]
) -> None:
    """For each connected TCP socket of the job whose other end is on this machine (a
    loopback address), the process that holds that end: sock["peer"] = {"pid", "cmd",
    "state", "in_job"} (issue 32 item 4: a local server that does not answer is named, not
    only its port). One scan of the machine's TCP sockets, and only when there is one."""
    local = [
        s
        for s in sockets
        if s.get("type") == "tcp" and s.get("raddr") and s.get("laddr") and _loopback(s["raddr"][0])
    ]
    if not local:
        return
    try:
        every = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError) as exc:
        notes.append(f"the machine's TCP sockets not readable ({type(exc).__name__})")
        return
    for sock in local:
        mine = (tuple(sock["laddr"]), tuple(sock["raddr"]))
        ends = [
            c for c in every if c.laddr and c.raddr and (tuple(c.raddr), tuple(c.laddr)) == mine
        ]
        if ends and ends[0].pid:
            pid = ends[0].pid
            sock["peer"] = {"pid": pid, **procfs.process_facts(pid), "in_job": pid in job_pids}
        elif ends:  # another user's process: its sockets are not ours to read
            notes.append(f"the process at the other end of {sock['raddr']} is not readable")
