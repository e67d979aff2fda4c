"""Diagnosis rules: from facts about a job to one specific answer (kind, summary, hint).

Pure: every function takes values (dicts, strings) and returns values. The evidence is
gathered elsewhere (bridge/evidence.py); the job's end and hang facts come from the client.
This is the seeds' three-layer method automated: (1) the blocking direction judged from
outside (kernel wait, CPU, I/O, sockets, children, GPU), (2) the stage with an enter and no
exit plus the blocking frame from the main thread's Python stack, (3) the environment facts
that the hint points at.

The rules live in four modules (the one implementation: a Node job is diagnosed here too):
  diagnosis_stack  reading Python stacks and text (frames, the user's frame, imports)
  diagnosis_end    end verdicts: why a process ended
  diagnosis_hang   hang verdicts: why a live job makes no progress (the words)
  diagnosis_hang_rules  the hang kind: ordered tables of small rules
This module is the one name the rest of the client imports. The shared cases (facts in ->
kind, frame, summary, hint out) are vectors/diagnosis.json; they pin the rules.

A diagnosis is a dict: {"kind", "summary", "hint", "evidence"}; summary and hint are one
ASCII-safe line each (the report is ASCII JSON; non-ASCII text is kept by the JSON escape).
"""

from __future__ import annotations

from .diagnosis_end import END_KINDS, NATIVE_SIGNALS, diagnose_end, stage_at_end
from .diagnosis_hang import HANG_KINDS, diagnose_hang
from .diagnosis_stack import (
    format_frame,
    importing_module,
    parse_stack,
    traceback_in_text,
    user_frame,
    where,
)


def kinds() -> tuple[str, ...]:
    """Every kind a diagnosis can have (ends first)."""
    return END_KINDS + HANG_KINDS


__all__ = (
    "diagnose_end",
    "diagnose_hang",
    "parse_stack",
    "format_frame",
    "importing_module",
    "traceback_in_text",
    "kinds",
    "where",
    "user_frame",
    "NATIVE_SIGNALS",
    "END_KINDS",
    "HANG_KINDS",
    "stage_at_end",
)
