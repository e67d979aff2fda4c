"""What the hub does with one incoming message, decided without sockets.

The pure core of bridge/hub.py, the one implementation (vectors/intake.json pins it): route
by the routing id's job part, verify and decode with that job's key, check the envelope's job
and its signed sender ("from") against the route, and judge the per-sender sequence number.
The caller counts what this returns (docs/PROTOCOL.md section 8):

- `job` None: the message names no job this client serves; counted once in the client's
  `unrouted`, which every report shows for its own lifetime (`protocol.unrouted`);
- `reject` set: counted in that job's `protocol.rejected[reject]`;
- otherwise the message is delivered; `lost` (messages missing in a seq gap) is added to
  the job's `protocol.lost`, and `last_seq` becomes the sender's new last seq.
`ack` is the seq to acknowledge (last words, also when replayed: our ack may have been
lost); `refuse` is the detail of an unsupported protocol version, to answer with `refuse`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from trainbridge.protocol import codec


def parse_routing_id(routing_id: bytes) -> tuple[Optional[str], int]:
    """(job id, rank) of "<job id>/<rank>[/<pid>]" (PROTOCOL.md section 1), or (None, 0)."""
    try:
        text = routing_id.decode("ascii")
    except UnicodeDecodeError:
        return None, 0
    return _parse(text)


def _parse(text: str) -> tuple[Optional[str], int]:
    # Job ids have no "/", so anything after the rank (the pid) is accepted and ignored here.
    parts = text.split("/", 2)
    if len(parts) < 2 or not parts[1].isdigit():  # ASCII digits only (text is ASCII)
        return None, 0
    return parts[0], int(parts[1])


def _verdict(
    job: Optional[str] = None,
    rank: int = 0,
    reject: Optional[str] = None,
    message: Optional[codec.Message] = None,
    lost: int = 0,
    last_seq: Optional[int] = None,
    ack: Optional[int] = None,
    refuse: Optional[str] = None,
) -> dict[str, Any]:
    return {
        "job": job,
        "rank": rank,
        "reject": reject,
        "message": message,
        "lost": lost,
        "last_seq": last_seq,
        "ack": ack,
        "refuse": refuse,
    }


def judge(
    routing_id: bytes,
    frames: Sequence[bytes],
    keys: Mapping[str, bytes],
    last_seq: Mapping[bytes, int],
) -> dict[str, Any]:
    """Judge one message (the frames after the routing id). `keys`: job id -> key of the
    jobs served; `last_seq`: routing id -> last accepted seq. Changes neither."""
    try:
        sender = routing_id.decode("ascii")
    except UnicodeDecodeError:
        return _verdict()
    job_id, rank = _parse(sender)
    key = keys.get(job_id) if job_id is not None else None
    if key is None:
        return _verdict()
    try:
        msg = codec.decode(frames, key, expect="worker")
    except codec.ProtocolError as exc:
        refuse = (
            (exc.detail or "unsupported protocol version")
            if exc.reason == "unsupported_version"
            else None
        )
        return _verdict(job_id, rank, exc.reason, refuse=refuse)
    if msg.job != job_id:
        return _verdict(job_id, rank, "bad_route")
    # A 1.1 worker signs its routing id: the same frames through another routing id (a
    # replay that would start a fresh seq there) are refused. A 1.0 peer signs none.
    if msg.sender is not None and msg.sender != sender:
        return _verdict(job_id, rank, "bad_sender")
    previous = last_seq.get(routing_id, 0)
    verdict, last = codec.check_seq(previous, msg.seq)
    ack = msg.seq if msg.kind in codec.FINAL_KINDS else None
    if verdict == "replay":
        return _verdict(job_id, rank, "replay", ack=ack)
    return _verdict(
        job_id,
        rank,
        message=msg,
        last_seq=last,
        ack=ack,
        lost=msg.seq - previous - 1 if verdict == "gap" else 0,
    )


# --- the total budget for unauthenticated input ------------------------------------------
# Per connection, libzmq holds at most RCVHWM unread messages (bridge/hub.py). Across all
# connections, what bounds memory is how fast the hub drains them: verifying a 1 MiB frame
# costs about a millisecond, so several flooding connections fill their queues (8 of them:
# client RSS +125 MiB). So the bytes of input that failed authentication are budgeted in
# total, per window: once a window's budget is spent, a message from a sender that already
# failed authentication is dropped unverified (a recv and a free: the queues drain at
# memory speed) and counted as `over_budget`. A sender that never failed is always
# verified, so a worker that connects during a flood still gets through.
UNAUTH_BUDGET_BYTES = 16 * 1024 * 1024  # rejected input verified per window, all senders
UNAUTH_WINDOW_S = 1.0
SUSPECTS_KEPT = 4096  # senders remembered as having failed authentication (oldest go)
# Rejections that do not make a sender suspect: a replay is a worker resending its last
# words until acked; an unsupported version is an honest older or newer worker.
NOT_SUSPECT = ("replay", "unsupported_version")


def budget_initial() -> dict[str, Any]:
    return {"t": None, "bytes": 0, "suspects": {}}


def _roll(budget: dict[str, Any], now: float) -> None:
    if budget["t"] is None or now - budget["t"] >= UNAUTH_WINDOW_S:
        budget["t"], budget["bytes"] = now, 0


def over_budget(budget: dict[str, Any], sender: str, now: float) -> bool:
    """Whether to drop this sender's message unverified: it failed authentication before
    and this window's budget of such input is spent."""
    _roll(budget, now)
    return sender in budget["suspects"] and budget["bytes"] >= UNAUTH_BUDGET_BYTES


def note_rejected(
    budget: dict[str, Any], sender: str, size: int, reject: Optional[str], now: float
) -> None:
    """Count a message the hub rejected (reject None: it named no job served) against the
    window's budget; its sender becomes suspect unless the reason is in NOT_SUSPECT."""
    if reject in NOT_SUSPECT:
        return
    _roll(budget, now)
    budget["bytes"] += size
    suspects = budget["suspects"]
    suspects.pop(sender, None)
    suspects[sender] = True
    while len(suspects) > SUSPECTS_KEPT:
        del suspects[next(iter(suspects))]
