"""Reachability part of `trainbridge doctor`: which hosts a job will talk to, and do they answer.

plan_targets() is pure (environment mapping in, targets out). probe_all() does the I/O: one
daemon thread per target and one overall deadline, because getaddrinfo() has no timeout of its
own; a thread still stuck when the deadline passes is abandoned and reported with the stage it
was in. Every socket operation also carries the remaining time as its timeout.
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import unquote, urlsplit

from .rules import is_truthy

DEFAULT_HF_ENDPOINT = "https://huggingface.co"
DEFAULT_PORTS = {"https": 443, "http": 80, "socks5": 1080, "socks5h": 1080, "socks4": 1080}


@dataclass(frozen=True)
class Endpoint:
    scheme: str  # https | http | tcp | socks5 ...
    host: str
    port: int
    user: Optional[str] = None
    password: Optional[str] = None

    @property
    def display(self) -> str:
        cred = "%s:***@" % self.user if self.user else ""
        scheme = "" if self.scheme == "tcp" else self.scheme + "://"
        return "%s%s%s:%d" % (scheme, cred, self.host, self.port)


@dataclass(frozen=True)
class Target:
    name: str  # stable check name, e.g. reach_hf_endpoint
    role: str  # hf_endpoint | proxy | host
    endpoint: Optional[Endpoint]
    via: Optional[Endpoint] = None  # proxy the request goes through
    skipped: Optional[str] = None


def parse_endpoint(text: str, default_scheme: str = "tcp") -> Endpoint:
    """'https://h', 'http://u:p@h:8080', 'h:22', 'h' -> Endpoint.
    Raises ValueError when unusable."""
    text = text.strip()
    if "://" not in text:
        text = "%s://%s" % (default_scheme, text)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if not parts.hostname:
        raise ValueError("no host in %r" % text)
    port = parts.port or DEFAULT_PORTS.get(scheme)
    if scheme == "tcp" and not port:
        scheme, port = "https", 443  # a bare host name: assume a web service
    if not port:
        raise ValueError("no port in %r" % text)
    return Endpoint(
        scheme,
        parts.hostname,
        port,
        unquote(parts.username) if parts.username else None,
        unquote(parts.password) if parts.password else None,
    )


def _get(env: Mapping[str, str], name: str) -> Optional[str]:
    return env.get(name) or env.get(name.lower()) or None


def bypasses_proxy(host: str, no_proxy: Optional[str]) -> bool:
    for entry in (no_proxy or "").replace(" ", "").split(","):
        if not entry:
            continue
        if entry == "*":
            return True
        entry = entry.lstrip(".").lstrip("*.")
        if host == entry or host.endswith("." + entry):
            return True
    return False


def proxy_for(scheme: str, host: str, env: Mapping[str, str]) -> Optional[str]:
    """The proxy URL requests/huggingface_hub would use for scheme://host (None: direct)."""
    if bypasses_proxy(host, _get(env, "NO_PROXY")):
        return None
    return _get(env, "HTTPS_PROXY" if scheme == "https" else "HTTP_PROXY") or _get(env, "ALL_PROXY")


def plan_targets(env: Mapping[str, str], hosts: Sequence[str] = ()) -> list[Target]:
    targets = []
    hf_url = env.get("HF_ENDPOINT") or DEFAULT_HF_ENDPOINT
    if is_truthy(env.get("HF_HUB_OFFLINE")):
        targets.append(
            Target(
                "reach_hf_endpoint",
                "hf_endpoint",
                None,
                skipped="HF_HUB_OFFLINE=%s: the hub is not contacted" % env["HF_HUB_OFFLINE"],
            )
        )
    else:
        try:
            hf = parse_endpoint(hf_url, "https")
            proxy = proxy_for(hf.scheme, hf.host, env)
            targets.append(
                Target(
                    "reach_hf_endpoint",
                    "hf_endpoint",
                    hf,
                    via=parse_endpoint(proxy, "http") if proxy else None,
                )
            )
        except ValueError as exc:
            targets.append(
                Target(
                    "reach_hf_endpoint",
                    "hf_endpoint",
                    None,
                    skipped="HF_ENDPOINT unusable: %s" % exc,
                )
            )
    seen = set()
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        value = env.get(var)
        if not value or value in seen:
            continue
        seen.add(value)
        try:
            ep = parse_endpoint(value, "http")
        except ValueError as exc:
            targets.append(
                Target("reach_" + var.lower(), "proxy", None, skipped="unusable: %s" % exc)
            )
            continue
        # The proxy itself is probed at TCP level; the hub check goes through it end to end.
        targets.append(Target("reach_" + var.lower(), "proxy", Endpoint("tcp", ep.host, ep.port)))
    for text in hosts:
        try:
            ep = parse_endpoint(text)
            targets.append(Target("reach_host:%s:%d" % (ep.host, ep.port), "host", ep))
        except ValueError as exc:
            targets.append(
                Target("reach_host:%s" % text, "host", None, skipped="unusable --host: %s" % exc)
            )
    return targets


# ---------------------------------------------------------------- I/O


class _Deadline:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        return left


def _connect(ep: Endpoint, deadline: _Deadline, state: dict[str, Any]) -> socket.socket:
    state["stage"] = "dns"
    infos = socket.getaddrinfo(ep.host, ep.port, type=socket.SOCK_STREAM)
    state["stage"] = "connect"
    error: Optional[Exception] = None
    for family, kind, proto, _name, addr in infos:
        sock = socket.socket(family, kind, proto)
        sock.settimeout(deadline.left())
        try:
            sock.connect(addr)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError("no address for %s" % ep.host)


def _read_head(sock: socket.socket, deadline: _Deadline) -> bytes:
    data = b""
    while b"\r\n" not in data and len(data) < 8192:
        sock.settimeout(deadline.left())
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    if not data:
        raise ConnectionError("closed without a reply")
    return data


def _status_line(head: bytes) -> str:
    return head.split(b"\r\n", 1)[0].decode("ascii", "replace")[:80]


def _tunnel(
    sock: socket.socket, proxy: Endpoint, ep: Endpoint, deadline: _Deadline, state: dict[str, Any]
) -> None:
    state["stage"] = "proxy"
    lines = ["CONNECT %s:%d HTTP/1.1" % (ep.host, ep.port), "Host: %s:%d" % (ep.host, ep.port)]
    if proxy.user:
        token = base64.b64encode(("%s:%s" % (proxy.user, proxy.password or "")).encode()).decode(
            "ascii"
        )
        lines.append("Proxy-Authorization: Basic " + token)
    sock.settimeout(deadline.left())
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
    status = _status_line(_read_head(sock, deadline))
    if status.split(" ")[1:2] != ["200"]:
        raise ConnectionError("proxy answered %r" % status)


def _exchange(target: Target, deadline: _Deadline, state: dict[str, Any]) -> Optional[str]:
    """Talk to the target just enough to know it answers; returns a short reply summary."""
    ep, via = target.endpoint, target.via
    assert ep is not None
    if via is not None and via.scheme.startswith("socks"):
        _connect(via, deadline, state).close()
        return "socks proxy port open; end-to-end not probed"
    sock = _connect(via or ep, deadline, state)
    try:
        if via is not None and ep.scheme == "https":
            _tunnel(sock, via, ep, deadline, state)
        if ep.scheme == "https":
            state["stage"] = "tls"
            sock.settimeout(deadline.left())
            tls = ssl.create_default_context().wrap_socket(sock, server_hostname=ep.host)
            sock = tls
            return "TLS %s" % tls.version()
        if ep.scheme == "http":
            state["stage"] = "reply"
            path = "http://%s:%d/" % (ep.host, ep.port) if via else "/"
            sock.settimeout(deadline.left())
            request = "HEAD %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, ep.host)
            sock.sendall(request.encode("ascii"))
            return _status_line(_read_head(sock, deadline))
        return None  # tcp: the connection is the answer
    finally:
        sock.close()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, socket.gaierror):
        return "DNS: %s" % (exc.strerror or exc)
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (
            "certificate not trusted (%s): an intercepting proxy needs its CA in SSL_CERT_FILE / "
            "REQUESTS_CA_BUNDLE" % exc.verify_message
        )
    return ("%s: %s" % (type(exc).__name__, exc))[:200]


def probe(target: Target, timeout: float, state: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    state = state if state is not None else {}
    facts: dict[str, Any] = {
        "target": target.endpoint.display if target.endpoint else None,
        "via": target.via.display if target.via else None,
    }
    if target.skipped:
        facts["skipped"] = target.skipped
        return facts
    start = time.monotonic()
    try:
        reply = _exchange(target, _Deadline(timeout), state)
        facts.update(ok=True, stage="done", reply=reply)
    except BaseException as exc:  # noqa: BLE001 - a report, never a crash
        facts.update(ok=False, stage=state.get("stage"), error=_describe(exc))
    facts["elapsed_s"] = round(time.monotonic() - start, 3)
    return facts


def probe_all(targets: Sequence[Target], timeout: float) -> dict[str, dict[str, Any]]:
    """Probe every target concurrently; returns within about `timeout` seconds whatever happens."""
    results: dict[str, dict[str, Any]] = {}
    states = {t.name: {"stage": "dns"} for t in targets}
    lock = threading.Lock()

    def run(target: Target) -> None:
        facts = probe(target, timeout, states[target.name])
        with lock:
            results[target.name] = facts

    threads = [
        threading.Thread(target=run, args=(t,), daemon=True, name="doctor-" + t.name)
        for t in targets
    ]
    start = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join(max(0.0, start + timeout + 0.25 - time.monotonic()))
    with lock:
        out = dict(results)
    for t in targets:
        if t.name not in out:  # stuck where no socket timeout applies (getaddrinfo): abandoned
            out[t.name] = {
                "target": t.endpoint.display if t.endpoint else None,
                "via": t.via.display if t.via else None,
                "ok": False,
                "stage": states[t.name].get("stage"),
                "error": "no answer within %.1f s" % timeout,
                "elapsed_s": round(time.monotonic() - start, 3),
            }
    return out
