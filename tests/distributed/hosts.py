"""Two simulated hosts on one machine (/work/shared/MULTIHOST.md): a network namespace
each, joined by a veth pair, with addresses only they have. Used by the two-host tests and
by benchmarks/bench_ddp_hosts.py. Needs root and iproute2."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Optional


@dataclass
class Hosts:
    ns_a: str
    ns_b: str
    veth_a: str
    veth_b: str
    addr_a: str
    addr_b: str

    def exec_a(self, *argv: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns_a, *argv]

    def exec_b(self, *argv: str) -> list[str]:
        """Host B: its own network namespace and its own PID namespace (with its own /proc),
        so its pids mean nothing on host A, as on two machines. Host A stays in the test's
        PID namespace: a process its client leaves behind must stay visible to the test."""
        return ["ip", "netns", "exec", self.ns_b, "unshare", "--pid", "--fork", "--mount-proc",
                *argv]  # fmt: skip

    def torchrun_args(self, on_b: bool, port: int, nproc: int = 2) -> list[str]:
        """c10d rendezvous on host A: is_host tells A's agent to host the store (both
        namespaces share the hostname); --local_addr keeps the ranks on the veth addresses."""
        return [
            "--nnodes=2",
            f"--nproc_per_node={nproc}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={self.addr_a}:{port}",
            "--rdzv_conf",
            f"is_host={0 if on_b else 1}",
            "--local_addr",
            self.addr_b if on_b else self.addr_a,
        ]


def cannot_make() -> Optional[str]:
    """Why namespaces cannot be made here, or None."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def make(tag: Optional[str] = None) -> Hosts:
    """Make the namespaces and the veth pair (remove() them after). Raises OSError with
    the reason when they cannot be made, having removed what was made."""
    why = cannot_make()
    if why is not None:
        raise OSError(why)
    tag = tag or f"tb{os.getpid() % 100000}"
    subnet = 10 + os.getpid() % 200  # 10.231.SUBNET.0/24, apart from a parallel run's
    hosts = Hosts(
        f"{tag}A", f"{tag}B", f"{tag}a", f"{tag}b", f"10.231.{subnet}.1", f"10.231.{subnet}.2"
    )
    try:
        _ip("netns", "add", hosts.ns_a)
        _ip("netns", "add", hosts.ns_b)
        _ip("link", "add", hosts.veth_a, "type", "veth", "peer", "name", hosts.veth_b)
        _ip("link", "set", hosts.veth_a, "netns", hosts.ns_a)
        _ip("link", "set", hosts.veth_b, "netns", hosts.ns_b)
        _ip("-n", hosts.ns_a, "addr", "add", f"{hosts.addr_a}/24", "dev", hosts.veth_a)
        _ip("-n", hosts.ns_b, "addr", "add", f"{hosts.addr_b}/24", "dev", hosts.veth_b)
        for ns, veth in ((hosts.ns_a, hosts.veth_a), (hosts.ns_b, hosts.veth_b)):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", veth, "up")
    except subprocess.CalledProcessError as exc:
        remove(hosts)
        stderr = exc.stderr.decode(errors="replace").strip()
        raise OSError(f"cannot make network namespaces: {stderr}") from None
    return hosts


def remove(hosts: Hosts, wait_s: float = 10.0) -> None:
    """Remove both namespaces (removing one removes its end of the veth). `ip netns del`
    fails while host B's last process (its own PID namespace's init) is still going: it is
    tried again until the name is gone, and a namespace left after `wait_s` is an error, not
    a leak for the next run to find."""
    left = [hosts.ns_a, hosts.ns_b]
    deadline = time.monotonic() + wait_s
    while True:
        for ns in list(left):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
            if not os.path.exists(os.path.join("/run/netns", ns)):
                left.remove(ns)
        if not left:
            return
        if time.monotonic() > deadline:
            raise OSError(f"could not remove the network namespaces {left} in {wait_s:g} s")
        time.sleep(0.1)  # its last process is exiting: try again, within the deadline
