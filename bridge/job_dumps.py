"""The stacks a hung job's processes write into its crash file when signalled: SIGUSR1
(faulthandler's Python dump, registered by the worker) and SIGUSR2 (its C dump, for a process
whose Python cannot run). Where the crash file stood when SIGUSR1 went, which pids answered,
which still need SIGUSR2, and the per-rank fallback: a local rank that did not answer the
hang's dump_stacks gets its stack into `ranks` from these dumps (bridge/rankdumps.py), once.

A part of bridge.job.Job that owns its state (the crash file's size when SIGUSR1 went, the
pids the fallback sent SIGUSR2) and is told the rest. I/O thread only, as every part of a
Job."""

from __future__ import annotations

import signal as signals
from typing import Any, Optional

from trainbridge.bridge import crash_text, launcher, rankdumps, ranks, report_files

HAS_SIGUSR2 = hasattr(signals, "SIGUSR2")


class SignalDumps:
    def __init__(self, crash_file: str) -> None:
        self.crash_file = crash_file  # "" for a job with none (no dump can be read)
        self.at: Optional[int] = None  # the crash file's size when SIGUSR1 went
        self.fallback_pids: Optional[set[int]] = None  # None until the fallback ran

    def sigusr1_sent(self) -> None:
        """SIGUSR1 goes out now: what the crash file holds from here on answers it."""
        self.at = report_files.crash_file_size(self.crash_file)

    def answered(self) -> set[int]:
        """The pids whose SIGUSR1 dump is in the crash file since it went."""
        return report_files.signal_dumped_pids(self.crash_file, self.at)

    def sigusr2_due(self, native_pids: list[int]) -> list[int]:
        """Of the processes that offered the C dump, those whose SIGUSR1 did not answer
        (Python runs in the others, and the C dump would race it, worker/hooks.py) and that
        the fallback did not send it to already."""
        answered = self.answered()
        sent = self.fallback_pids or set()
        return [pid for pid in native_pids if pid not in answered and pid not in sent]

    def fallback(
        self, state: dict[str, Any], hang_answered: set[bytes], native_pids: list[int]
    ) -> None:
        """After SIGUSR1 at hang time: each local rank in `state` (bridge/ranks.py) that is
        not in `hang_answered` (the routing ids that answered the hang's dump_stacks) gets
        its stack from its SIGUSR1 dump, else from SIGUSR2, once."""
        if self.fallback_pids is not None or not self.crash_file:
            return
        self.fallback_pids = set()
        since = rankdumps.read_from(self.crash_file, self.at or 0)
        sections = crash_text.sigusr1_sections(since)
        for key, p in list(state["procs"].items()):
            pid = p["pid"]
            if (
                p["world_size"] is None
                or p.get("addr")  # another host's: no signal goes there
                or p["exit"] is not None
                or key.encode("ascii", "replace") in hang_answered
                or not isinstance(pid, int)
            ):
                continue
            text = sections.get(pid)
            if text is None and pid in native_pids and HAS_SIGUSR2:
                # Not in signals_sent: that list is the lead's escalation (a SIGUSR2 there
                # means the lead's Python was silent); the dump shows in the crash file.
                self.fallback_pids.add(pid)
                text = rankdumps.native_dump(self.crash_file, pid, _send_sigusr2)
            if text:
                ranks.observe(state, key, "signal_dump", {"stacks": text}, p["last_beat"])


def _send_sigusr2(pid: int) -> None:  # rankdumps.native_dump's `send` returns nothing
    launcher.signal_process(pid, signals.SIGUSR2)
