"""A Job's worker messages: each authentic message from a process of the job, turned into
published events, report facts and machine events; who speaks for the job (the lead); replies
to commands; the stage records; whether a hello comes from the job's own process tree; what
job.send() held until the lead's hello. A part of bridge.job.Job (job.messages): it reads and
moves the job's state through the Job it is given, and steps the machine through job.actions.
The one implementation: a Node face renders these events from bridge/jobserve.py's feed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

from trainbridge.bridge import (
    health,
    job_facts,
    launcher,
    machine,
    procfs,
    ranks,
    slurm,
    status,
)
from trainbridge.bridge.job_actions import SIGNALS

if TYPE_CHECKING:
    from trainbridge.bridge.job import JobCore
    from trainbridge.protocol import codec

LEADS_KEPT = 16  # lead changes kept for the report


class Messages:
    """Job's worker-messages room (I/O thread): job.messages."""

    def __init__(self, job: JobCore) -> None:
        self.job = job
        self.boot = procfs.boot_id()  # a sender with the same one shares time.monotonic()
        # For a sender whose monotonic clock is not ours (another host's rank, another boot):
        # the least (receipt - mt) seen from it, by routing id (_waited).
        self._least: dict[bytes, float] = {}

    def on_message(self, routing_id: bytes, rank: int, msg: codec.Message) -> None:
        """A worker's message, in four steps: admitted (from a process of this job), recorded
        (the report's facts, who said it), published to listeners, then heard by the machine:
        the lead's by its kind (LEAD_STEPS), another process's only where it moves the job."""
        now = time.monotonic()
        kind = msg.kind
        body = self._admitted(routing_id, kind, msg.body, now)
        if body is None:
            return
        lead = routing_id == self.job.election.lead
        sender, health_entries = self._record(routing_id, rank, msg, body, lead, now)
        if kind == "logs":
            # A batch of consecutive records (PROTOCOL.md): listeners see each as a `log`
            # message, as if it had come alone; the machine hears of the message once.
            self.job.publisher.publish_records(rank, body["records"], sender)
            if lead:
                self.job.actions.step({"type": "beat", "t": now})
            return
        self.job.publisher.publish(
            {"event": "message", "kind": kind, "rank": rank, "body": body, "sender": sender}
        )
        if lead and kind in ("stage", "progress"):
            self.job.actions.publish_status()  # the judged view of what just came
        for entry in health_entries:
            self._on_health(entry, sender)
        if kind == "reply" and self.job.asks.reply(routing_id, body):  # from any process
            self.job.actions.step({"type": "dumped", "t": now})  # the hang's dump_stacks answered
        if kind in ("bye", "error") and self.job.remote_ranks and self.job.m["ending"] is None:
            # Every rank may have ended now, one of another host failed: nothing here knows.
            if ranks.failed_elsewhere(ranks.table(self.job.facts["ranks"])) is not None:
                self.job.actions.step({"type": "ranks_failed", "t": now})
        if lead:
            LEAD_STEPS.get(kind, Messages._lead_beat)(self, routing_id, kind, body, now)
        else:
            self._from_another(routing_id, kind, body, now)

    def _admitted(
        self, routing_id: bytes, kind: str, body: dict[str, Any], now: float
    ) -> Optional[dict[str, Any]]:
        """The message's body when it comes from a process of this job (a hello of one that
        is not marks its sender foreign: it neither leads nor is listed, and what it sends
        later is rejected and counted, docs/PROTOCOL.md "Trust boundary"), else None. A
        hello is noted as present, and may change the lead."""
        if routing_id in self.job.election.foreign:
            self.job.channel.rejected["foreign"] += 1
            self.job.channel.peers.pop(routing_id, None)
            return None
        if kind != "hello":
            return body
        remote = self.job.remote_ranks and routing_id in self.job.hub.peer_addr
        if body.get("slurm"):
            body = slurm.hello_facts(body)  # its node's name, an srun task's rank
        if not remote and not self._hello_in_tree(body):
            self.job.election.foreign.add(routing_id)
            self.job.facts["foreign_hellos"] += 1
            self.job.channel.peers.pop(routing_id, None)  # commands go to the job's own only
            return None
        # `remote`: its pid is another host's (machine.choose_lead)
        self.job.election.said_hello(routing_id, dict(body, remote=True) if remote else body)
        if self._elect() and routing_id != self.job.election.lead:
            self.job.actions.step(
                {"type": "lead", "t": now, "present": self.job.election.lead is not None}
            )
        return body

    def _record(
        self,
        routing_id: bytes,
        rank: int,
        msg: codec.Message,
        body: dict[str, Any],
        lead: bool,
        now: float,
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The message into the report's facts (job_facts.apply, pure) and the live status:
        returns who said it (docs/CLIENT.md) and the health entries it added."""
        key = routing_id.decode("ascii", "replace")
        remote = self.job.remote_ranks and routing_id in self.job.hub.peer_addr
        message = {"kind": msg.kind, "body": body, "key": key, "rank": rank, "ts": msg.ts}
        # Never a signal to a rank of another host: its pid names a process over there.
        message.update(lead=lead, t=now, in_tree=not remote and self._dumps_to(body))
        said = len(self.job.facts["health"]["entries"])
        self.job.facts = job_facts.apply(self.job.facts, message)
        sender = dict(ranks.sender(self.job.facts["ranks"], key), lead=lead)
        if msg.kind == "hello":  # a distributed launcher's: no rank, the job starts with its ranks
            sender["awaits_ranks"] = ranks.awaits_ranks(body)
            self._least.pop(routing_id, None)  # a process that says hello starts its clock anew
        if lead and msg.kind in ("stage", "progress"):
            # before listeners hear: status() agrees; at the time the worker sent it
            age = self._waited(routing_id, msg, now)
            self.job.live_status.track(
                msg.kind, body, status.sent_at(now, time.time(), msg.ts, age)
            )
        if lead:
            self.job.last_message_t = now
        return sender, self.job.facts["health"]["entries"][said:]

    def _waited(self, routing_id: bytes, msg: codec.Message, now: float) -> Optional[float]:
        """How long the message waited since it was sent, by monotonic clocks, which a
        wall-clock step on either side does not move (the envelope's mt). A sender on this
        boot shares ours: now - mt. Another host's rank (or another boot) has its own, which
        runs at our rate from another origin: (now - mt) is that offset plus the time the
        message took, so its least value from this sender is the offset plus the quickest
        delivery seen, and a message waited what it took beyond that. None without an mt
        (an older worker: status.sent_at uses the wall clock's ts)."""
        if msg.mt is None:
            return None
        hello = self.job.election.present.get(routing_id) or {}
        if self.boot is not None and not hello.get("remote") and hello.get("boot") == self.boot:
            return now - msg.mt
        seen = now - msg.mt
        least = self._least.get(routing_id)
        if least is None or seen < least:
            self._least[routing_id] = least = seen
        return seen - least

    def _from_another(self, routing_id: bytes, kind: str, body: dict[str, Any], now: float) -> None:
        """A message of a process that does not lead: published, but the machine hears only
        a rank's hello (the job has started) and a bye (it can no longer lead)."""
        if (
            kind == "hello"
            and body.get("world_size") is not None
            and self.job.m.get("awaiting_ranks")
        ):
            self.job.actions.step(
                {"type": "hello", "t": now, "dump_signal": bool(self.job.facts["dump_pids"])}
            )
        if kind == "bye":
            self._leave(routing_id, now)

    # --- I/O thread: the lead's messages as the machine hears them, by kind (LEAD_STEPS) ----
    def _lead_hello(self, routing_id: bytes, kind: str, body: dict[str, Any], now: float) -> None:
        self.job.actions.step(
            {
                "type": "hello",
                "t": now,
                "dump_signal": bool(self.job.facts["dump_pids"]),
                "native_dump": bool(self.job.facts["native_dump_pids"]) and "SIGUSR2" in SIGNALS,
                "awaits_ranks": ranks.awaits_ranks(body),
            }
        )
        self.send_outbox()

    def _lead_stage(self, routing_id: bytes, kind: str, body: dict[str, Any], now: float) -> None:
        self.job.actions.step(
            {
                "type": "stage",
                "t": now,
                "event": body["event"],
                "name": body["name"],
                "depth": body.get("depth"),
                "budget_s": body.get("budget_s"),
            }
        )

    def _lead_progress(
        self, routing_id: bytes, kind: str, body: dict[str, Any], now: float
    ) -> None:
        self.job.actions.step({"type": "progress", "t": now})

    def _lead_error(self, routing_id: bytes, kind: str, body: dict[str, Any], now: float) -> None:
        self._step_error(body, now)

    def _lead_bye(self, routing_id: bytes, kind: str, body: dict[str, Any], now: float) -> None:
        self._step_bye(body, now)
        self._leave(routing_id, now)

    def _lead_reply(self, routing_id: bytes, kind: str, body: dict[str, Any], now: float) -> None:
        """The answer to the in-band cancel, or a dump's: a beat either way."""
        if self.job.asks.cancel_answered(body):
            self._on_cancel_reply(body, now)
        self._lead_beat(routing_id, kind, body, now)

    def _lead_beat(self, routing_id: bytes, kind: str, body: dict[str, Any], now: float) -> None:
        """Any other message (a heartbeat, a log, a metric...): the lead is alive. A heartbeat
        may show work (look.heard), and may be due a live look."""
        worked = False
        if kind == "heartbeat":
            worked = self.job.deadline_look.heartbeat(body, now)
        self.job.actions.step({"type": "beat", "t": now, **({"work": True} if worked else {})})
        if kind == "heartbeat" and machine.live_look_due(self.job.m):
            self.job.actions.live_diagnose()

    # --- I/O thread: who speaks for the job -------------------------------------------------
    def _elect(self) -> bool:
        """A new election of the lead (job_leads.Leads); True when the lead changed, which the
        report's facts record and listeners hear."""
        if not self.job.election.elect(self.job.pid, self._launched_loaded):
            return False
        pid = self.job.election.lead_pid
        self.job.facts["lead_pid"] = pid
        self.job.deadline_look.new_lead()  # its own heartbeats' work and places count from here
        self.job.facts["leads"] = (self.job.facts["leads"] + [pid])[-LEADS_KEPT:]
        self.job.publisher.publish({"event": "lead", "pid": pid})
        return True

    def _launched_loaded(self, present: list[dict[str, Any]]) -> bool:
        """Whether the launched process, which has not said hello, loaded the worker (its
        stage box exists): it may still lead (machine.choose_lead)."""
        return (
            self.job.pid is not None
            and bool(self.job.crash_file)
            and all(h.get("pid") != self.job.pid for h in present)
            and os.path.exists(f"{self.job.crash_file}.stages.{self.job.pid}")
        )

    def _leave(self, routing_id: bytes, now: float) -> None:
        """A process said bye or is gone. The launched process never leaves: its last words
        are the job's. Another one that led hands the lead back (machine event "lead")."""
        if not self.job.election.leave(routing_id, self.job.pid):
            return
        if self._elect() and self.job.m["exit"] is None:
            self.job.actions.step(
                {"type": "lead", "t": now, "present": self.job.election.lead is not None}
            )
            self._replay_last_words(now)

    def _replay_last_words(self, now: float) -> None:
        """The new lead's fatal error and bye, said while another process led (torchrun
        raised as its rank 0 died, and rank 0's death was noticed after): the job's now."""
        lead = self.job.election.lead
        if lead is None:
            return
        p = self.job.facts["ranks"]["procs"].get(lead.decode("ascii", "replace"))
        if p is None:
            return
        body = p.get("body")  # ranks.observe keeps a fatal error's body only
        if body is not None:
            self.job.facts["error"] = body
            self._step_error(body, now)
        bye = p.get("bye")
        if bye is not None:
            self.job.facts["bye"] = bye
            self._step_bye(bye, now)

    def _step_error(self, body: dict[str, Any], now: float) -> None:
        """The lead's error, as the machine hears it."""
        self.job.actions.step(
            {
                "type": "error",
                "t": now,
                "fatal": bool(body.get("fatal")),
                "kind": body.get("kind"),
                "exit_code": body.get("exit_code"),
            }
        )

    def _step_bye(self, body: dict[str, Any], now: float) -> None:
        """The lead's bye, as the machine hears it."""
        self.job.actions.step(
            {
                "type": "bye",
                "t": now,
                "reason": body.get("reason"),
                "exit_code": body.get("exit_code"),
            }
        )

    def check_lead_alive(self, now: float) -> None:
        lead = self.job.election.lead
        if lead is None or self.job.facts["lead_pid"] == self.job.pid or self.job.tree is None:
            return
        created = self.job.tree.known.get(self.job.facts["lead_pid"])
        if not _process_alive(self.job.facts["lead_pid"], created):
            self._leave(lead, now)

    def _on_health(self, entry: dict[str, Any], sender: dict[str, Any]) -> None:
        """A metric became NaN or infinite (bridge/health.py): said in a `health` event, and
        the job cancelled when the user asked for that (stop_on_nan)."""
        self.job.publisher.publish({"event": "health", **entry, "sender": sender})
        if health.stops(entry, self.job.stop_on_nan) and self.job.m["exit"] is None:
            self.job.actions.ask_cancel(
                None, f"{entry['text']}: stopped, as stop_on_nan asks", by="health"
            )

    def _on_cancel_reply(self, body: dict[str, Any], now: float) -> None:
        """The lead's answer to the in-band cancel: accepted, or refused and why."""
        info = (
            self.job.facts["cancel"] if self.job.facts["cancel"] is not None else {"reason": None}
        )
        self.job.facts["cancel"] = info
        if body.get("ok"):
            info.update(accepted=True, refused=None)
        else:
            info.update(accepted=False, refused=str(body.get("error") or "refused"))
        self.job.publisher.publish(
            {
                "event": "cancel",
                "reason": info.get("reason"),
                "accepted": info["accepted"],
                "refused": info["refused"],
            }
        )
        if not info["accepted"]:
            self.job.actions.step({"type": "cancel_refused", "t": now, "reason": info["refused"]})

    def send_outbox(self) -> None:
        """What job.send() held, to the lead (once it said hello; never after the end)."""
        lead = self.job.election.lead
        if lead is not None and not self.job.done():
            self.job.outbox.send(self.job.channel, lead)

    def on_refused(self, reason: str) -> None:
        self.job.actions.step({"type": "refused", "t": time.monotonic(), "reason": reason})

    def _dumps_to(self, hello: dict[str, Any]) -> bool:
        """A hello that offers a dump signal: is its process in the job's tree (so that the
        signal may go to it)? The tree is read only then."""
        offers = (hello.get("dump_signal"), hello.get("native_dump_signal"))
        return offers != (None, None) and self._in_tree(hello.get("pid"))

    def _hello_in_tree(self, hello: dict[str, Any]) -> bool:
        """Whether a hello comes from the job's tree: its pid is, or (a subprocess that said
        hello and exited before we looked) its pid is gone and its parent is ours."""
        pid = hello.get("pid")
        if self._in_tree(pid):
            return True
        return (
            isinstance(pid, int)
            and not _process_alive(pid, None)
            and self._in_tree(hello.get("ppid"))
        )

    def _in_tree(self, pid: Any) -> bool:
        if not isinstance(pid, int):
            return False
        if pid == self.job.pid:  # ours for sure; the tree's snapshot can miss it in a race
            return True
        if self.job.tree is None:
            if self.job.pid is None:
                return False
            self.job.tree = launcher.Tree(self.job.pid, self.job.id)  # a hello before _attach ran
        self.job.tree.refresh()
        return pid in self.job.tree.known


# What the machine hears of the lead's message, by its kind; any other kind is a beat.
LEAD_STEPS: dict[str, Callable[[Messages, bytes, str, dict[str, Any], float], None]] = {
    "hello": Messages._lead_hello,
    "stage": Messages._lead_stage,
    "progress": Messages._lead_progress,
    "error": Messages._lead_error,
    "bye": Messages._lead_bye,
    "reply": Messages._lead_reply,
}


def _process_alive(pid: Any, created: Optional[float]) -> bool:
    """Whether `pid` is still the process that was seen (same start time), not a zombie."""
    if not isinstance(pid, int):
        return False
    now = procfs.running_since(pid)
    return now is not None and (created is None or now == created)
