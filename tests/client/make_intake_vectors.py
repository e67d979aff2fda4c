"""Writes vectors/intake.json: what the hub does with each incoming message, and how the
verdicts are counted (bridge/intake.py judge, the one implementation).

Frames are made with trainbridge.protocol.codec; the expected verdicts are written by hand from
docs/PROTOCOL.md sections 6 and 8. tests/client/test_intake.py runs the committed file:
feed the steps in order, keep
last_seq per routing id from accepted verdicts, count as the file's "about" says, compare.
"""

import hashlib
import hmac
import json
import os

import msgpack

from trainbridge.protocol import codec

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
KEYS = {"job-a": bytes(range(32)), "job-b": bytes(range(32, 64))}
A, A2, B = "job-a/0/10", "job-a/0/11", "job-b/1/20"
TS = 1764460800.0
HELLO = {
    "pid": 10,
    "argv": ["python", "t.py"],
    "cwd": "/",
    "python": {},
    "host": "h",
    "env": {},
    "packages": {},
    "proto": "1.1",
    "worker": "t",
    "heartbeat_s": 1.0,
}


def enc(kind, seq, body, job="job-a", sender=A, key=None):
    return codec.encode(kind, seq, body, key or KEYS[job], job, ts=TS, sender=sender)


def progress(step):
    return {"step": step, "total": None, "metrics": {}}


def version2():
    packed = msgpack.packb(
        {"body": {}, "job": "job-a", "kind": "heartbeat", "seq": 9, "ts": 0, "v": 2},
        use_bin_type=True,
    )
    return [packed, hmac.new(KEYS["job-a"], packed, hashlib.sha256).digest()]


def expect(job=None, reject=None, kind=None, lost=0, ack=None, refuse=False):
    return {"job": job, "reject": reject, "kind": kind, "lost": lost, "ack": ack, "refuse": refuse}


P2 = enc("progress", 2, progress(1))
P5 = enc("progress", 5, progress(4))
BYE = enc("bye", 6, {"exit_code": 0, "reason": "normal"})
STEPS = [
    ("hello, signed by its sender", A, enc("hello", 1, HELLO), expect("job-a", kind="hello")),
    ("the next seq", A, P2, expect("job-a", kind="progress")),
    ("a gap of 2", A, P5, expect("job-a", kind="progress", lost=2)),
    ("the same frames again: replay", A, P5, expect("job-a", "replay")),
    (
        "A's frames through another routing id of the job: bad_sender, not a fresh sender",
        A2,
        P2,
        expect("job-a", "bad_sender"),
    ),
    (
        "A's hello through another routing id",
        A2,
        enc("hello", 1, HELLO),
        expect("job-a", "bad_sender"),
    ),
    (
        "that routing id with its own signed messages is a sender of its own",
        A2,
        enc("hello", 1, HELLO, sender=A2),
        expect("job-a", kind="hello"),
    ),
    ("last words are acked", A, BYE, expect("job-a", kind="bye", ack=6)),
    (
        "and acked again when replayed (our ack was lost), not delivered",
        A,
        BYE,
        expect("job-a", "replay", ack=6),
    ),
    (
        "one frame for a known job: that job's bad_frames",
        A,
        [b"garbage"],
        expect("job-a", "bad_frames"),
    ),
    ("three frames", A, [P2[0], P2[1], b""], expect("job-a", "bad_frames")),
    ("a job this client does not serve: unrouted", "job-z/0/1", P2, expect()),
    ("no rank in the routing id: unrouted", "job-a", P2, expect()),
    ("a rank that is not digits: unrouted", "job-a/x/10", P2, expect()),
    (
        "job-b's route, signed with job-a's key",
        B,
        enc("hello", 1, HELLO, job="job-b", sender=B, key=KEYS["job-a"]),
        expect("job-b", "bad_signature"),
    ),
    (
        "job-a's envelope through job-b's route",
        B,
        enc("hello", 1, HELLO, job="job-a", sender=B, key=KEYS["job-b"]),
        expect("job-b", "bad_route"),
    ),
    (
        "a 1.0 peer signs no sender: accepted",
        B,
        enc("hello", 1, HELLO, job="job-b", sender=None),
        expect("job-b", kind="hello"),
    ),
    ("protocol v2: refused", A, version2(), expect("job-a", "unsupported_version", refuse=True)),
]

COUNTS = {
    "jobs": {
        "job-a": {
            "rejected": {"replay": 2, "bad_sender": 2, "bad_frames": 2, "unsupported_version": 1},
            "lost": 2,
            "delivered": 5,
        },
        "job-b": {"rejected": {"bad_signature": 1, "bad_route": 1}, "lost": 0, "delivered": 1},
    },
    "unrouted": 3,
}


MIB = 1024 * 1024
# The total budget for unauthenticated input (intake.over_budget / note_rejected), in order:
# ["reject", sender, bytes, reason (null: no job served), t] counts a rejected message;
# ["check", sender, t, expected] asks whether that sender's next message is dropped
# unverified. The budget is 16 MiB per 1 s window, over all senders.
BUDGET = [
    ["check", "j/0/9", 0.0, False],
    ["reject", "j/0/9", 10 * MIB, "bad_signature", 0.0],
    ["check", "j/0/9", 0.1, False],  # 10 MiB of 16 spent: still verified
    ["reject", "j/0/8", 6 * MIB, "bad_signature", 0.2],  # another sender: 16 of 16
    ["check", "j/0/9", 0.3, True],  # spent, and j/0/9 failed before: dropped unverified
    ["check", "j/0/8", 0.3, True],
    ["check", "j/0/1", 0.3, False],  # never failed (a worker connecting now): verified
    ["reject", "j/0/1", 100, "replay", 0.4],  # a worker resending its last words
    ["check", "j/0/1", 0.5, False],  # ... does not become suspect
    ["reject", "j/0/2", 100, "unsupported_version", 0.5],
    ["check", "j/0/2", 0.6, False],
    ["reject", "x/0/7", 100, None, 0.6],  # named no job served: counts, suspect
    ["check", "x/0/7", 0.7, True],
    ["check", "j/0/9", 1.2, False],  # a new window: verified again
    ["reject", "j/0/9", 17 * MIB, "bad_frames", 1.3],
    ["check", "j/0/9", 1.4, True],
]


def check_budget():
    from trainbridge.bridge import intake

    budget = intake.budget_initial()
    for step in BUDGET:
        if step[0] == "reject":
            _, sender, size, reason, t = step
            intake.note_rejected(budget, sender, size, reason, t)
        else:
            _, sender, t, expected = step
            assert intake.over_budget(budget, sender, t) is expected, step


def main():
    check_budget()
    doc = {
        "about": "Incoming messages in order: judge(routing_id, frames, keys, last_seq) must "
        "give each step's verdict (job: the routed job or null; reject: the reason "
        "or null; kind: the delivered message's kind; lost; ack: the seq to ack or "
        "null; refuse: whether to answer 'refuse'). Counting, as both hubs do: job "
        "null -> unrouted += 1; reject -> jobs[job].rejected[reject] += 1; else "
        "delivered += 1, lost += verdict lost, last_seq[routing_id] = the verdict's "
        "last_seq. After the last step the counts must equal 'counts'.",
        "keys_hex": {job: key.hex() for job, key in KEYS.items()},
        "steps": [
            {
                "name": name,
                "routing_id": rid,
                "frames_hex": [bytes(f).hex() for f in frames],
                "verdict": verdict,
            }
            for name, rid, frames, verdict in STEPS
        ],
        "counts": COUNTS,
        "budget": BUDGET,
    }
    with open(os.path.join(ROOT, "vectors", "intake.json"), "w", encoding="ascii") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
