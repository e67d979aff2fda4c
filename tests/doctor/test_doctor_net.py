"""Host reachability: the plan is a table; the probes talk to loopback servers that never answer."""

import socket
import threading
import time

import pytest

from trainbridge.bridge.doctor import net as N
from trainbridge.bridge.doctor.rules import FAIL, OK, SKIP, WARN, reach_verdict


@pytest.mark.parametrize(
    "text, want",
    [
        ("https://huggingface.co", ("https", "huggingface.co", 443)),
        ("http://127.0.0.1:8080/x", ("http", "127.0.0.1", 8080)),
        ("127.0.0.1:22", ("tcp", "127.0.0.1", 22)),
        ("example.org", ("https", "example.org", 443)),
        ("socks5://127.0.0.1", ("socks5", "127.0.0.1", 1080)),
    ],
)
def test_parse_endpoint(text, want):
    ep = N.parse_endpoint(text)
    assert (ep.scheme, ep.host, ep.port) == want


def names(targets):
    return [
        (
            t.name,
            t.role,
            t.endpoint.display if t.endpoint else None,
            t.via.display if t.via else None,
            t.skipped is not None,
        )
        for t in targets
    ]


@pytest.mark.parametrize(
    "env, hosts, want",
    [
        ({}, [], [("reach_hf_endpoint", "hf_endpoint", "https://huggingface.co:443", None, False)]),
        ({"HF_HUB_OFFLINE": "1"}, [], [("reach_hf_endpoint", "hf_endpoint", None, None, True)]),
        (
            {"HF_ENDPOINT": "https://hf-mirror.com", "HTTPS_PROXY": "http://u:pw@127.0.0.1:7890"},
            ["127.0.0.1:9"],
            [
                (
                    "reach_hf_endpoint",
                    "hf_endpoint",
                    "https://hf-mirror.com:443",
                    "http://u:***@127.0.0.1:7890",
                    False,
                ),
                ("reach_https_proxy", "proxy", "127.0.0.1:7890", None, False),
                ("reach_host:127.0.0.1:9", "host", "127.0.0.1:9", None, False),
            ],
        ),
        (
            {"https_proxy": "http://127.0.0.1:1", "NO_PROXY": ".huggingface.co"},
            [],
            [
                ("reach_hf_endpoint", "hf_endpoint", "https://huggingface.co:443", None, False),
                ("reach_https_proxy", "proxy", "127.0.0.1:1", None, False),
            ],
        ),
        (
            {"HTTP_PROXY": "http://127.0.0.1:1", "HTTPS_PROXY": "http://127.0.0.1:1"},
            [],
            [
                (
                    "reach_hf_endpoint",
                    "hf_endpoint",
                    "https://huggingface.co:443",
                    "http://127.0.0.1:1",
                    False,
                ),
                ("reach_https_proxy", "proxy", "127.0.0.1:1", None, False),
            ],
        ),  # one probe per distinct proxy
    ],
)
def test_plan_targets(env, hosts, want):
    assert names(N.plan_targets(env, hosts)) == want


def test_silent_host_is_reported_within_its_timeout(silent_server):
    # The server completes the TCP handshake and then never says a word.
    target = N.plan_targets({"HF_HUB_OFFLINE": "1"}, ["http://127.0.0.1:%d" % silent_server])[1]
    t0 = time.monotonic()
    facts = N.probe_all([target], 0.5)[target.name]
    elapsed = time.monotonic() - t0
    assert (facts["ok"], facts["stage"], facts["error"]) == (False, "reply", "timed out")
    assert elapsed < 0.5 + 1.0  # time to know: the probe's own deadline, not the OS's
    v = reach_verdict("host", facts)
    assert v.verdict == FAIL and "no reply" in v.detail


def test_silent_https_host_fails_the_tls_stage(silent_server):
    target = N.Target("t", "host", N.parse_endpoint("https://127.0.0.1:%d" % silent_server))
    facts = N.probe_all([target], 0.4)["t"]
    assert (facts["ok"], facts["stage"]) == (False, "tls")


def test_refused_port_fails_fast(closed_port):
    target = N.Target("t", "host", N.parse_endpoint("127.0.0.1:%d" % closed_port))
    facts = N.probe_all([target], 2.0)["t"]
    assert (facts["ok"], facts["stage"]) == (False, "connect")
    assert "ConnectionRefusedError" in facts["error"]


def test_proxy_that_never_answers_the_tunnel(silent_server):
    env = {"HTTPS_PROXY": "http://127.0.0.1:%d" % silent_server}
    targets = N.plan_targets(env)
    out = N.probe_all(targets, 0.5)
    hub, proxy = out["reach_hf_endpoint"], out["reach_https_proxy"]
    assert (hub["ok"], hub["stage"]) == (False, "proxy")  # CONNECT sent, no answer
    assert proxy["ok"] is True  # the port itself is open
    assert reach_verdict("hf_endpoint", hub).verdict == WARN
    assert "HF_HUB_OFFLINE=1" in reach_verdict("hf_endpoint", hub).fix


def test_answering_http_host_is_ok():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def answer():
        conn, _ = srv.accept()
        conn.recv(1024)
        conn.sendall(b"HTTP/1.0 204 No Content\r\n\r\n")
        conn.close()

    th = threading.Thread(target=answer, daemon=True)
    th.start()
    target = N.Target("t", "host", N.parse_endpoint("http://127.0.0.1:%d" % srv.getsockname()[1]))
    facts = N.probe_all([target], 2.0)["t"]
    th.join(2.0)
    srv.close()
    assert facts["ok"] is True and facts["reply"] == "HTTP/1.0 204 No Content"
    assert reach_verdict("host", facts).verdict == OK


def test_dns_that_never_answers_is_abandoned(monkeypatch):
    # getaddrinfo has no timeout: a resolver that never answers must not hold doctor.
    release = threading.Event()

    def stuck(*args, **kwargs):
        release.wait(30)
        raise socket.gaierror(-2, "released")

    monkeypatch.setattr(N.socket, "getaddrinfo", stuck)
    target = N.Target("t", "host", N.parse_endpoint("https://blackhole.invalid"))
    t0 = time.monotonic()
    try:
        facts = N.probe_all([target], 0.3)["t"]
    finally:
        release.set()
    assert time.monotonic() - t0 < 0.3 + 1.0
    assert (facts["ok"], facts["stage"], facts["error"]) == (False, "dns", "no answer within 0.3 s")


def test_unresolvable_name_fails_quickly_with_a_hint():
    target = N.Target("t", "hf_endpoint", N.parse_endpoint("https://does-not-exist.invalid"))
    facts = N.probe_all([target], 3.0)["t"]
    assert facts["ok"] is False and facts["stage"] == "dns"
    v = reach_verdict("hf_endpoint", facts)
    assert v.verdict == WARN and "HTTPS_PROXY" in v.fix


def test_skipped_target_is_not_probed():
    target = N.plan_targets({"HF_HUB_OFFLINE": "1"})[0]
    facts = N.probe_all([target], 0.1)[target.name]
    assert reach_verdict("hf_endpoint", facts).verdict == SKIP
