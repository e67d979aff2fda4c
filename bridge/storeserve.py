"""The Node client's way into a store: a Scheduler in a helper process, spoken to in JSON lines.

    python -m trainbridge.bridge.storeserve STORE [SLOTS_JSON]

Each request is one line on stdin, {"id": n, "op": name, "args": {...}}; each answer one
line on stdout, {"id": n, "ok": true, "result": ...} or {"id": n, "ok": false, "error": text}.
Ops: jobs {state, limit, tag}, get {id}, submit {cmd, cwd, env, timeouts, resources, priority,
max_restarts, restart_backoff, zero_code, name, tags, meta, log_path, stop_on_nan, slurm},
cancel {id}, forget {id}, request {id, op, data} (ping, dump_stacks or send,
scheduled.request: returns the request id; the answer comes as a "reply" event), pause {},
resume {}, paused {}, forgotten {}, keep_ended {}, rerun {id, env}, watch {watch: n} (n: the
asker's number for it; each change of bridge/watch.py comes as its own line, {"watch": n,
"change": {...}}, the first ones, every row "added", before the answer), unwatch {watch},
judge {id, judge: n} (a scheduled job whose feed the asker reads itself, judged here beyond
its lines by bridge/feed_judge.py, the rule Python's attach() follows: each `supervisor`
event, the keeper not answering or answering again, as {"judge": n, "event": {...}}, and,
when the row says ended and the feed's end line is not coming, the `end` made from the row,
after which nothing more comes for n), unjudge {judge}.
All strict ASCII JSON (NaN as "NaN": bridge/jsonform.py). A failure of the store itself
(bridge/store_errors.py) also gives its `kind`; a store that cannot be opened answers every
request so.
The helper is a full Scheduler (it reconciles and starts queued jobs while it runs) and ends
when its stdin closes. So the Node package needs no native SQLite module: the one store
implementation is Python's, which a Node user of trainbridge has for the worker anyway.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable, Optional, Protocol

from trainbridge.bridge import feed, jsonform
from trainbridge.bridge.attach import POLL_S, ROW_EVERY_S, row_end
from trainbridge.bridge.feed_judge import FeedJudge
from trainbridge.bridge.scheduler import Scheduler
from trainbridge.bridge.store import Store
from trainbridge.bridge.store_errors import StoreError


class Out:
    """stdout, one whole line at a time: answers (the main thread) and watches' changes
    (their threads) never interleave."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.lock = threading.Lock()

    def line(self, obj: dict[str, Any]) -> None:
        text = jsonform.dumps(obj, default=str) + "\n"
        with self.lock:
            self.stream.write(text)
            self.stream.flush()


class Closable(Protocol):
    def close(self) -> None: ...


class ByNumber:
    """What a Node process asked the helper to keep doing (a watch, a judged job), each under
    the asker's number: its lines carry it, and it is stopped by it."""

    def __init__(self, out: Out, kind: str):
        self.out, self.kind = out, kind
        self.open: dict[int, Closable] = {}

    def new(self, number: Any) -> int:
        if not isinstance(number, int) or isinstance(number, bool) or number in self.open:
            raise ValueError(f"{self.kind}: a new number is needed, not {number!r}")
        return number

    def stop(self, number: Any) -> bool:
        found = self.open.pop(number, None)
        if found is not None:
            found.close()
        return found is not None

    def close(self) -> None:
        for number in list(self.open):
            self.stop(number)


class Watches(ByNumber):
    """The watches a Node process asked for, by number."""

    def __init__(self, out: Out):
        super().__init__(out, "watch")

    def start(self, sched: Scheduler, number: Any) -> int:
        """Watch under the asker's number (its first changes come before the answer)."""
        n = self.new(number)

        def send(change: dict[str, Any]) -> None:
            self.out.line({"watch": n, "change": change})

        self.open[n] = sched.watch(on_change=send)
        return n


class Judged(ByNumber):
    """The jobs a Node process follows (its AttachedJob reads the feed's lines itself), each
    judged on a thread of its own, by number; forgotten when the asker stops it (its end
    included)."""

    def __init__(self, out: Out):
        super().__init__(out, "judge")

    def start(self, store_path: str, args: dict[str, Any]) -> bool:
        number = self.new(args.get("judge"))

        def send(event: dict[str, Any]) -> None:
            self.out.line({"judge": number, "event": event})

        self.open[number] = FeedWatch(store_path, str(args.get("id")), send)
        return True


class FeedWatch:
    """One job's feed watched for its judge (bridge/feed_judge.py): its size (the keeper's
    writes; the lines are the asker's to read) and its row."""

    def __init__(self, store_path: str, job_id: str, send: Callable[[dict[str, Any]], None]):
        self.store = Store(store_path)
        row = self.store.get(job_id)
        if row is None:
            self.store.close()
            raise LookupError(f"no job {job_id!r} in {store_path}")
        self.id, self.row, self.send = job_id, row, send
        self.closed = threading.Event()
        self.thread = threading.Thread(
            target=self._watch, daemon=True, name=f"trainbridge-judge-{job_id}"
        )
        self.thread.start()

    def close(self) -> None:
        """Stop it; not waited for (it ends within a poll, closing its store): a dashboard
        that lets go of many jobs at once does not hold the helper's requests meanwhile."""
        self.closed.set()

    def _say(self, said: Optional[dict[str, Any]]) -> None:
        if said is not None:
            self.send({**said, "t": time.time()})

    def _watch(self) -> None:
        judge = FeedJudge()
        path, size, next_row = self.row["events_path"], 0, 0.0
        try:
            while not self.closed.is_set():
                now = time.monotonic()
                try:
                    grown = os.stat(path).st_size
                except OSError:
                    grown = 0
                grew = grown > size
                if grew:
                    size = grown
                    self._say(judge.grew(now, self.row))
                if now >= next_row:
                    next_row = now + ROW_EVERY_S
                    row = self.store.get(self.id)
                    if row is None or row["state"] == "ended":
                        if row is not None and feed.ends(path):
                            return  # the feed's own end line: the reader has it
                        if judge.end_from_row(now, row):
                            self.send(row_end(row))
                            return
                    else:
                        self.row = row
                if not grew:
                    self._say(judge.quiet(now, self.row))
                self.closed.wait(POLL_S)
        finally:
            self.store.close()


def handle(
    sched: Scheduler, op: str, args: dict[str, Any], watches: Watches, judged: Judged
) -> Any:
    if op == "watch":
        return watches.start(sched, args.get("watch"))
    if op == "unwatch":
        return watches.stop(args.get("watch"))
    if op == "judge":
        return judged.start(sched.path, args)
    if op == "unjudge":
        return judged.stop(args.get("judge"))
    if op == "jobs":
        return sched.jobs(args.get("state"), args.get("limit"), args.get("tag"))
    if op == "get":
        return sched.get(args["id"])
    if op == "submit":
        # The options as the Node face gave them (scheduler.SubmitOptions by name); a null is
        # an option not given: the defaults are Python's, in one place.
        options = {k: v for k, v in args.items() if k != "cmd" and v is not None}
        return sched.submit(args["cmd"], **options)
    if op == "pause":
        return sched.pause()
    if op == "resume":
        return sched.resume()
    if op == "paused":
        return sched.paused
    if op == "forgotten":
        return sched.forgotten()
    if op == "keep_ended":
        return sched.keep_ended
    if op == "rerun":
        return sched.rerun(args["id"], env=args.get("env"))
    if op == "cancel":
        return sched.cancel(args["id"], reason=args.get("reason"), grace=args.get("grace"))
    if op == "forget":
        return sched.forget(args["id"])
    if op == "request":
        return sched.request(args["id"], args["op"], args.get("data"))
    if op == "ping":
        return {"store": sched.path, "slots": sched.slots}
    raise ValueError(f"unknown op {op!r}")


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(
            "usage: python -m trainbridge.bridge.storeserve STORE [SLOTS_JSON] [OPTIONS_JSON]",
            file=sys.stderr,
        )
        return 2
    slots = json.loads(args[1]) if len(args) > 1 and args[1] else None
    # OPTIONS_JSON: {"keep_ended": N or null}: the store's retention (Node's keepEnded).
    options = json.loads(args[2]) if len(args) > 2 and args[2] else {}
    sched: Optional[Scheduler] = None
    broken: Optional[StoreError] = None
    try:
        retention = {"keep_ended": options["keep_ended"]} if "keep_ended" in options else {}
        sched = Scheduler(store=args[0], slots=slots, **retention)
    except StoreError as exc:  # every request is answered with why (Node: a StoreError)
        broken = exc
    out = Out(sys.stdout)
    watches = Watches(out)
    judged = Judged(out)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            request: dict[str, Any] = {}
            try:
                request = json.loads(line)
                if broken is not None:
                    raise broken
                assert sched is not None
                op: Any = request.get("op")  # handle() refuses what is not an op
                answer = {
                    "id": request.get("id"),
                    "ok": True,
                    "result": handle(sched, op, request.get("args") or {}, watches, judged),
                }
            except Exception as exc:  # noqa: BLE001 - every failure is an answer, not a crash
                answer = {
                    "id": request.get("id"),
                    "ok": False,
                    "error": f"{type(exc).__name__}: {exc}",
                }
                if isinstance(exc, StoreError):
                    answer["kind"] = exc.kind
            out.line(answer)
    finally:
        judged.close()
        watches.close()
        if sched is not None:
            sched.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
