"""vectors/intake.json: the hub's verdict on each incoming message and how it is counted
(bridge/intake.py, the one implementation)."""

import collections
import json
import os

from trainbridge.bridge import intake

V = json.load(
    open(
        os.path.join(os.path.dirname(__file__), "..", "..", "vectors", "intake.json"),
        encoding="ascii",
    )
)


def test_intake_vectors():
    keys = {job: bytes.fromhex(key) for job, key in V["keys_hex"].items()}
    last_seq = {}
    counts = {
        "jobs": {
            job: {"rejected": collections.Counter(), "lost": 0, "delivered": 0} for job in keys
        },
        "unrouted": 0,
    }
    for step in V["steps"]:
        rid = step["routing_id"].encode("ascii")
        frames = [bytes.fromhex(f) for f in step["frames_hex"]]
        before = dict(last_seq)
        v = intake.judge(rid, frames, keys, last_seq)
        assert last_seq == before, "judge must not change its input"
        got = {
            "job": v["job"],
            "reject": v["reject"],
            "kind": v["message"].kind if v["message"] is not None else None,
            "lost": v["lost"],
            "ack": v["ack"],
            "refuse": v["refuse"] is not None,
        }
        assert got == step["verdict"], step["name"]
        if v["job"] is None:
            counts["unrouted"] += 1
        elif v["reject"] is not None:
            counts["jobs"][v["job"]]["rejected"][v["reject"]] += 1
        else:
            job = counts["jobs"][v["job"]]
            job["delivered"] += 1
            job["lost"] += v["lost"]
            last_seq[rid] = v["last_seq"]
    for job in counts["jobs"].values():
        job["rejected"] = dict(job["rejected"])
    assert counts == V["counts"]


def test_unauthenticated_input_budget_vectors():
    """The total budget over all senders: past 16 MiB per second of input
    that failed authentication, a sender that failed before is dropped unverified; one that
    never failed is always verified."""
    budget = intake.budget_initial()
    for step in V["budget"]:
        if step[0] == "reject":
            _, sender, size, reason, t = step
            intake.note_rejected(budget, sender, size, reason, t)
        else:
            _, sender, t, expected = step
            assert intake.over_budget(budget, sender, t) is expected, step
