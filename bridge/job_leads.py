"""Who speaks for a job: the processes of the job that said hello and have not left, the
routing ids refused as foreign, and the lead among those present (machine.choose_lead, the
one rule; vectors/lead.json pins it). A part of bridge.job.Job that owns its state and is
told what it needs (the launched process's pid, whether that process loaded the worker)
when it elects. I/O thread only, as every part of a Job."""

from __future__ import annotations

from typing import Any, Callable, Optional

from trainbridge.bridge import machine


class Leads:
    def __init__(self) -> None:
        # Hellos of the processes that may lead (said hello, have not left), in order.
        self.present: dict[bytes, dict[str, Any]] = {}
        self.foreign: set[bytes] = set()  # routing ids whose hello came from outside the tree
        self.lead: Optional[bytes] = None  # the routing id of the process that speaks
        self.lead_pid: Optional[int] = None

    def said_hello(self, routing_id: bytes, hello: dict[str, Any]) -> None:
        self.present[routing_id] = hello

    def elect(
        self,
        launched: Optional[int],
        launched_loaded: Callable[[list[dict[str, Any]]], bool],
    ) -> bool:
        """machine.choose_lead over the processes present (launched_loaded(present): whether
        the launched process, present or not, loaded the worker); True when the lead changed,
        and then `lead` and `lead_pid` say who leads now."""
        present = list(self.present.values())
        pid = machine.choose_lead(present, launched, launched_loaded(present))
        lead = next((rid for rid, hello in self.present.items() if hello.get("pid") == pid), None)
        if lead == self.lead:
            return False
        self.lead, self.lead_pid = lead, pid
        return True

    def leave(self, routing_id: bytes, launched: Optional[int]) -> bool:
        """A process said bye or is gone: no longer present (True), unless it never said
        hello or is the launched process, whose last words are the job's (False)."""
        hello = self.present.get(routing_id)
        if hello is None or hello.get("pid") == launched:
            return False
        del self.present[routing_id]
        return True
