"""The job state machine: step(state, event) -> (state, actions). Pure and I/O-free.

Everything is a JSON value: the state, the events (each carries its time `t`, in seconds on
the shell's monotonic clock; there is no clock in here) and the actions. The shell (Job in
bridge/job.py) turns what happens into events, performs the actions, and asks
next_deadline(state) when to send the next "timer" event. The one implementation: a Node
job's machine is this one, through bridge/jobserve.py. vectors/machine.json holds the trace
tables that pin it; docs/CLIENT.md documents the vocabulary. This module never mutates its
arguments.

States: starting -> running <-> stalled -> ended.
Outcomes: succeeded | failed | crashed | hung | cancelled, decided in one place: outcome().

Events ({"type": ..., "t": ...} plus):
  hello      dump_signal: bool (the worker can dump stacks on SIGUSR1), native_dump: bool
             (and its main thread's stack on SIGUSR2, faulthandler's C handler),
             awaits_ranks: bool (a distributed launcher's hello: the job is still starting
             until a hello without it; the startup deadline holds)
  stage      event: "begin"|"end", name, depth?: int, budget_s?: num
  progress   (step and total are the shell's business)
  beat       any other authentic worker message: heartbeat, log, reply (the beacon lives).
             work?: bool: the lead's heartbeat counted more training work than its last
             (`work`, the backward() calls the zero-code hook saw): activity for the stall
             deadlines, as progress is (a loop that updates its weights by hand and never
             calls an optimizer trains). Like output, it never arms them.
  output     the job printed a line (stdout or stderr). It is activity for the stall
             deadlines only while the job has never reported progress (a script that trains
             by hand and prints): a job with a progress source keeps strict progress
             semantics. It never arms the stall deadlines (a stage or progress does) and is
             not a beacon message. Shells may send at most a few per second.
  error      fatal: bool, kind: str, exit_code?: int (the worker's error message)
  bye        reason: str, exit_code?: int
  dumped     the worker answered a dump_stacks command
  signal_dumped  the lead's SIGUSR1 handler wrote its stacks (Python ran on its main thread)
  snapshotted  the hang evidence asked for by "snapshot" is collected
  refused    reason: str (the worker speaks an unsupported protocol version)
  worker_loaded  dump_signal: bool, native_dump: bool (SIGUSR1 / SIGUSR2 have handlers, from
             /proc's SigCgt). The worker was imported (its stage box exists) but has
             not said hello: from then on the heartbeat deadline applies, so a GIL held
             right after `import worker` is known within heartbeat_timeout, not after the
             startup timeout. t is when it loaded.
  no_worker  reason: str (a process said it cannot load the worker: no hello will come,
             so the startup deadline no longer applies)
  looked     reason: "startup" | "heartbeat" | "stall", working: bool, since?: num. The
             shell's answer to a "look"
             action: what the job's tree did over a short window (bridge/look.py). startup,
             working (no Python in the tree yet, or CPU, I/O or output moving): the job is
             starting, and the startup deadline runs again from now. heartbeat, working (the
             lead's threads waited for a CPU: a starved machine): the beacon's silence is
             the machine's, and the heartbeat deadline runs again from now. stall, working
             (the lead is busy and its main thread moved through the script's own functions
             since the last activity): it computes, and `since` (when it last moved) is
             activity, unless that is a whole stall_timeout ago. Not working: that hang is
             declared now.
  cancel     grace?: num (seconds between the in-band cancel and SIGTERM)
  cancel_refused  reason: str (the worker answered the in-band cancel that it cannot
             stop the script, e.g. SIGINT is ignored: SIGTERM at once, not after the grace)
  user_signal  signal: str. The user sent the process SIGINT, SIGTERM or SIGHUP outside
             cancel() (`run --transparent` forwarding its own signal, the Node shell's
             kill()): no escalation follows, but a job that then ends, whatever its exit,
             was cancelled (not crashed by the signal, not failed by its KeyboardInterrupt).
             Ignored once the process exited or another ending (hang, cancel) runs.
  exit       code: int|null, signal: str|null (from the OS; the process is gone)
  drained    the shell has read what the dead process left in the socket and the pipes
  lead       present: bool. The process that spoke for the job left (said bye, or is gone)
             while the job goes on, and another one speaks for it now (present) or none
             does (no heartbeat is watched until one says hello). The leaver's last words
             are not the job's: its bye is forgotten, and the new lead's clocks start now.
  held       held: bool. The job's processes wait in another scheduler's queue (a Slurm job
             PENDING: its runner said hello, its ranks cannot start yet), or no longer do.
             While held the start-up, stall and stage-budget deadlines do not run (a queue
             is not a hang, however long); the heartbeat's does (the runner lives). At the
             release they go on from where they were, moved by the time held.
  paused     paused_s: num. The supervisor itself did not run that long (a SIGSTOPped keeper,
             a starved machine): that time is not the worker's silence. The clocks the
             running deadlines watch (start, last message, last activity, stage budgets) move
             on by it, so a backlog the supervisor has not read yet is no hang. An ending's
             own deadlines do not move. Ignored once the process exited or an ending runs.
  ranks_failed  every rank of a distributed job has ended, one of another host failed, and
             the launched process goes on: torchrun here waits (its exit barrier, 300 s) for
             an agent that failed and will never come, and cannot know it. The job failed:
             the tree is stopped (SIGTERM, SIGKILL after kill_grace) and its outcome is
             failed, the root cause being that rank (bridge/ranks.py failed_elsewhere).
             Ignored once the process exited or another ending runs.
  timer      a deadline may have passed

Actions ({"do": ...} plus):
  state      state: the new state name (emitted on every change)
  snapshot   reason: collect hang evidence now, while the process still lives; send
             "snapshotted" when done (SIGTERM waits for it, up to snapshot_timeout)
  dump_stacks   send the in-band dump_stacks command
  cancel     send the in-band cancel command
  signal     signal: "SIGUSR1" | "SIGUSR2" (the process only) | "SIGTERM" | "SIGKILL" (the
             whole tree). SIGUSR2 only when neither dump_stacks nor SIGUSR1 was answered:
             no Python runs in the process (native code holds the GIL), so faulthandler's C
             handler can read the main thread's frames without racing anything.
  drain      read what is left (socket and pipes), then send "drained"
  look       reason: "startup" | "heartbeat" | "stall". That deadline passed: look at the job's tree
             (over LOOK_S) and send "looked"; no answer within LOOK_TIMEOUT_S is the hang,
             as before the look
  finish     outcome: the job is over; build the report

Its length (about 600 lines, over the ~400 of the other rooms): one handler per event over
one state dict, and the deadlines they share. vectors/machine.json pins the whole table of
transitions at once; split, the rules that race (stall against heartbeat, snapshot against
exit) would be read apart.
"""

from __future__ import annotations

from typing import Any, Optional

State = dict[str, Any]
Event = dict[str, Any]
Action = dict[str, Any]

# Seconds; None disables a deadline. The CLI and launch() override these.
DEFAULTS: dict[str, Optional[float]] = {
    "startup_timeout": 120.0,  # spawn -> hello
    "heartbeat_timeout": 30.0,  # last worker message -> hung, while the process lives
    "stall_timeout": None,  # last progress/stage change -> hung (off unless asked for)
    "stalled_after": 30.0,  # last progress/stage change -> state "stalled" (reversible)
    "kill_grace": 5.0,  # SIGTERM -> SIGKILL
    "cancel_grace": 5.0,  # in-band cancel -> SIGTERM, unless the cancel event says
    "dump_timeout": 1.0,  # dump_stacks command -> give up on the reply
    "signal_dump_wait": 0.2,  # SIGUSR1 -> SIGTERM: faulthandler writes synchronously
    "snapshot_timeout": 2.0,  # hang -> SIGTERM at the latest while evidence is collected
    "drain_timeout": 1.0,  # exit -> outcome, at the latest, if "drained" never comes
}

# The deadlines None may switch off; the other settings are always a number of seconds.
OPTIONAL = ("startup_timeout", "heartbeat_timeout", "stall_timeout", "stalled_after")


def config_problem(config: dict[str, Any]) -> Optional[tuple[str, str]]:
    """The first bad setting in `config`, as (key, problem), or None when all are good.
    problem: "unknown" (no such setting), "type" (not a number of seconds, or None where
    that is not allowed; a bool is not a number), "not_finite" (NaN or an infinity),
    "negative". vectors/config.json pins this, and Node's configProblem
    (node-client/src/settings.js), which checks launch()'s options first and words the
    message in its own option names. Checked before anything is registered or spawned."""
    for key in sorted(config):
        if key not in DEFAULTS:
            return key, "unknown"
    for key in DEFAULTS:
        if key not in config:
            continue
        value = config[key]
        if value is None and key in OPTIONAL:
            continue
        if type(value) not in (int, float):
            return key, "type"
        if value != value or value in (float("inf"), float("-inf")):
            return key, "not_finite"
        if value < 0:
            return key, "negative"
    return None


HANG_REASONS = ("startup", "stage_budget", "stall", "heartbeat", "after_bye")
# The look at the startup deadline: the shell samples the job's tree twice,
# LOOK_S apart; an answer that has not come LOOK_TIMEOUT_S after the deadline (a shell that
# could not look) leaves the verdict to the deadline, as before the look existed.
LOOK_S = 1.0
LOOK_TIMEOUT_S = 5.0
LOOKED_AT = ("startup", "heartbeat", "stall")  # the deadlines that look before they judge


def initial(config: Optional[dict[str, Any]] = None, t: float = 0.0) -> State:
    """The state of a job spawned at time t."""
    unknown = set(config or {}) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown machine config keys: {sorted(unknown)}")
    return {
        "state": "starting",
        "outcome": None,
        "config": {**DEFAULTS, **(config or {})},
        "t0": t,
        "hello": False,
        "dump_signal": False,
        "native_dump": False,
        "answered": False,  # a dump (in-band or SIGUSR1) was answered: Python runs
        "last_msg_t": None,  # beacon: last authentic worker message
        "last_activity_t": None,  # work: last progress or stage change; None = stall unarmed
        "progress_seen": False,  # a progress source exists: output no longer counts as work
        "stages": [],  # open stages, outermost first: {name, t, budget_s}
        "error": None,  # the last fatal error: {kind, exit_code}
        "bye": None,  # {reason, exit_code}
        "exit": None,  # {code, signal}
        "hang": None,  # {reason, t, stage}
        "snapshot": None,  # None | "pending" | "done" | "timed_out": hang evidence
        "ending": None,  # {reason: hang|cancel|refused, step, deadline}
        "drain_deadline": None,
        "refused": None,
        "no_worker": None,  # why no hello will come (the startup deadline is off)
        "startup_from": t,  # the startup deadline runs from here (a look that saw work moves it)
        "look": None,  # {"reason", "deadline"}: a look asked for and not answered yet
        "loaded_t": None,  # the worker loaded (stage box) before any hello
        "awaiting_ranks": False,  # only a distributed launcher said hello: still starting
        "held_since": None,  # t of a "held" event not released yet (another queue holds it)
        "lead_gone": False,  # the lead left and no other process speaks for the job
        "user_signal": None,  # the signal the user sent outside cancel(): a cancel
    }


def step(state: State, event: Event) -> tuple[State, list[Action]]:
    """Apply one event. Returns the new state and the actions for the shell, in order."""
    s = _copy(state)
    actions: list[Action] = []
    if s["state"] == "ended":
        return s, actions
    t = float(event["t"])
    kind = event["type"]
    handler = _HANDLERS.get(kind)
    if handler is None:
        raise ValueError(f"unknown event type {kind!r}")
    handler(s, event, t, actions)
    return s, actions


# The drain after the exit (drain_wait): how long a pipe held by a grandchild may keep the
# job; without a bye (the lead's last word) or every connection's end notice, how long the
# socket must stay quiet (longer while an end notice is due: libzmq drops one when the
# connection's queue was full). vectors/drain.json pins the rule.
PIPE_LINGER_S = 0.2
DRAIN_QUIET_S = 0.005
DRAIN_NOTICE_WAIT_S = 0.025


def drain_wait(
    pipes_open: bool,
    since_drain_s: float,
    bye: bool,
    connections_ended: bool,
    notice_due: bool,
    quiet_s: float,
) -> float:
    """Seconds until the drain may end, 0.0 when it has: the pipes are done (closed, or the
    linger is over) and the socket holds nothing more from the lead (it said bye, every
    connection of the job sent its end notice, or nothing came for the quiet time since the
    later of its last message and the exit). Inputs change as output and messages come:
    ask again then."""
    waits = [PIPE_LINGER_S - since_drain_s] if pipes_open else []
    if not (bye or connections_ended):
        waits.append((DRAIN_NOTICE_WAIT_S if notice_due else DRAIN_QUIET_S) - quiet_s)
    return round(max(0.0, *waits), 6) if waits else 0.0


def live_look_due(state: State) -> bool:
    """Whether a live diagnosis is wanted now: the job is stalled and no verdict is being
    made (a hang's ending signals the tree: a look then sees it half gone), nor has it
    exited."""
    return state["state"] == "stalled" and state["ending"] is None and state["exit"] is None


def next_deadline(state: State) -> Optional[float]:
    """The earliest time at which a "timer" event may change something; None if none."""
    if state["state"] == "ended":
        return None
    deadline: Optional[float]
    if state["exit"] is not None:
        deadline = state["drain_deadline"]
        return deadline
    if state["ending"] is not None:
        deadline = state["ending"]["deadline"]
        return deadline
    return min((d for _, d in _watch_deadlines(state)), default=None)


def _copy(state: State) -> State:
    """A copy the handlers may change without touching `state`. The state is two levels
    deep (records and lists of flat records) and config is never written, so this is a
    full copy at a tenth of copy.deepcopy's cost, which dominated a busy job's I/O thread."""
    out = dict(state)
    for key, value in out.items():
        if type(value) is dict and key != "config":
            out[key] = dict(value)
        elif type(value) is list:
            out[key] = [dict(v) if type(v) is dict else v for v in value]
    return out


# --- event handlers -------------------------------------------------------------------
def _on_hello(s: State, e: Event, t: float, actions: list[Action]) -> None:
    s["hello"] = True
    s["lead_gone"] = False
    s["dump_signal"] = bool(e.get("dump_signal"))
    s["native_dump"] = bool(e.get("native_dump"))
    s["last_msg_t"] = t
    # A distributed launcher's hello (torchrun) does not end start-up: its ranks have not
    # started, and may never (a rendezvous waiting for nodes). The first rank's hello does.
    s["awaiting_ranks"] = bool(e.get("awaits_ranks"))
    look = s["look"]
    if look is not None and (look["reason"] == "heartbeat" or not s["awaiting_ranks"]):
        s["look"] = None  # it spoke, or started: the look's answer no longer matters
    if s["awaiting_ranks"]:
        return
    if s["state"] == "starting" and s["ending"] is None:
        _set_state(s, "running", actions)


def _on_stage(s: State, e: Event, t: float, actions: list[Action]) -> None:
    _beacon(s, t)
    name = e["name"]
    depth = e.get("depth")
    if e["event"] == "begin":
        s["stages"].append({"name": name, "t": t, "budget_s": e.get("budget_s"), "depth": depth})
    else:
        # The innermost open stage with this name (and depth, when given) closes, and with
        # it every stage opened inside it.
        for i in range(len(s["stages"]) - 1, -1, -1):
            st = s["stages"][i]
            if st["name"] == name and (depth is None or st.get("depth") in (None, depth)):
                del s["stages"][i:]
                break
    _activity(s, t, actions)


def _on_progress(s: State, e: Event, t: float, actions: list[Action]) -> None:
    _beacon(s, t)
    s["progress_seen"] = True
    _activity(s, t, actions)


def _on_output(s: State, e: Event, t: float, actions: list[Action]) -> None:
    # A script with no progress source that prints a line every few seconds is
    # working, not stalled.
    if not s["progress_seen"] and _armed(s):
        _activity(s, t, actions)


def _armed(s: State) -> bool:
    """The stall deadlines run: a stage or progress armed them, and no ending or bye came."""
    return s["last_activity_t"] is not None and s["bye"] is None and s["ending"] is None


def _on_beat(s: State, e: Event, t: float, actions: list[Action]) -> None:
    _beacon(s, t)
    if e.get("work") and _armed(s):
        _activity(s, t, actions)  # training work the script reports to nobody


def _on_error(s: State, e: Event, t: float, actions: list[Action]) -> None:
    _beacon(s, t)
    if e.get("fatal"):
        s["error"] = {"kind": e.get("kind"), "exit_code": e.get("exit_code")}


def _on_bye(s: State, e: Event, t: float, actions: list[Action]) -> None:
    _beacon(s, t)
    s["bye"] = {"reason": e.get("reason"), "exit_code": e.get("exit_code")}
    ending = s["ending"]
    if ending is not None and ending["step"] == "cancel":
        # The script heard the cancel and is in Python's shutdown (the bye is sent from its
        # last atexit handler): what is left is teardown (torch's takes seconds on a busy
        # machine). It gets a grace of its own before SIGTERM (cancel_grace from the bye; a
        # cancel's shorter `grace` was for stopping the script, which it did).
        grace = s["config"]["cancel_grace"]
        ending.update(step="exiting", deadline=max(ending["deadline"], t + grace))


def _on_paused(s: State, e: Event, t: float, actions: list[Action]) -> None:
    gap = e.get("paused_s")
    if s["exit"] is not None or s["ending"] is not None or not gap or gap <= 0:
        return
    for key in ("t0", "startup_from", "loaded_t", "last_msg_t", "last_activity_t"):
        if s[key] is not None:
            s[key] += gap
    if s["look"] is not None:
        s["look"]["deadline"] += gap
    for st in s["stages"]:
        st["t"] += gap


def _on_held(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["exit"] is not None or s["ending"] is not None:
        return
    since = s.get("held_since")
    if e.get("held"):
        if since is None:
            s["held_since"] = t
        return
    if since is None:
        return
    s["held_since"] = None
    gap = max(0.0, t - since)
    for key in ("startup_from", "last_activity_t"):
        if s[key] is not None:
            s[key] += gap
    for st in s["stages"]:
        st["t"] += gap


def _on_lead(s: State, e: Event, t: float, actions: list[Action]) -> None:
    s["bye"] = None
    s["stages"] = []  # the leaver's open stages (and their budgets) went with it
    s["lead_gone"] = not e.get("present")
    if not s["lead_gone"]:
        s["last_msg_t"] = t
        if s["look"] is not None and s["look"]["reason"] in ("heartbeat", "stall"):
            s["look"] = None  # a look at the leaver: the new lead's clocks start now
        if s["last_activity_t"] is not None:
            s["last_activity_t"] = t
            if s["state"] == "stalled" and s["ending"] is None:
                _set_state(s, "running", actions)


def _on_dumped(s: State, e: Event, t: float, actions: list[Action]) -> None:
    s["answered"] = True
    ending = s["ending"]
    if ending is not None and ending["step"] == "dump" and s["exit"] is None:
        _after_dump(s, t, actions)


def _on_signal_dumped(s: State, e: Event, t: float, actions: list[Action]) -> None:
    s["answered"] = True


def _on_snapshotted(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["snapshot"] == "pending":
        s["snapshot"] = "done"
        ending = s["ending"]
        if ending is not None and ending["step"] == "snapshot" and s["exit"] is None:
            _terminate(s, t, actions)


def _on_worker_loaded(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if not s["hello"] and s["loaded_t"] is None:
        s["loaded_t"] = t
        s["dump_signal"] = bool(e.get("dump_signal"))
        s["native_dump"] = bool(e.get("native_dump"))


def _on_looked(s: State, e: Event, t: float, actions: list[Action]) -> None:
    look = s["look"]
    if look is None or look["reason"] != e.get("reason") or s["exit"] is not None:
        return
    s["look"] = None
    reason = look["reason"]
    if s["ending"] is not None or (reason == "startup" and s["hello"]):
        return  # a hello (or another ending) came while the shell looked
    since = e.get("since")
    if type(since) not in (int, float):
        since = None
    elif s["config"]["stall_timeout"] is not None and since + s["config"]["stall_timeout"] <= t:
        since = None  # it last moved a whole stall_timeout ago: no evidence of now
    if not e.get("working") or (reason == "stall" and since is None):
        _hang(s, reason, t, actions)
        return
    if reason == "stall" and since is not None:
        # Activity at `since`, in the past: running again only if that is recent enough
        last, after = s["last_activity_t"], s["config"]["stalled_after"]
        s["last_activity_t"] = since if last is None else max(last, since)
        if s["state"] == "stalled" and (after is None or s["last_activity_t"] + after > t):
            _set_state(s, "running", actions)
    elif reason == "startup":
        s["startup_from"] = t
    elif s["hello"]:
        s["last_msg_t"] = t  # the heartbeat deadline runs again from now
    elif s["loaded_t"] is not None:
        s["loaded_t"] = t


def _on_no_worker(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["no_worker"] is None:
        s["no_worker"] = e.get("reason") or "the worker cannot be loaded"


def _on_refused(s: State, e: Event, t: float, actions: list[Action]) -> None:
    s["refused"] = e.get("reason") or "unsupported protocol version"
    if s["ending"] is None and s["exit"] is None:
        s["ending"] = {"reason": "refused", "step": None, "deadline": None}
        _terminate(s, t, actions)


def _on_cancel_refused(s: State, e: Event, t: float, actions: list[Action]) -> None:
    ending = s["ending"]
    if ending is not None and ending["reason"] == "cancel" and ending["step"] == "cancel":
        _terminate(s, t, actions)


def _on_cancel(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["ending"] is not None or s["exit"] is not None:
        return  # already ending: the running sequence finishes the job
    grace = e.get("grace")
    grace = s["config"]["cancel_grace"] if grace is None else grace
    ending: dict[str, Any] = {"reason": "cancel", "step": None, "deadline": None}
    s["ending"] = ending
    if s["hello"] and grace > 0:
        ending.update(step="cancel", deadline=t + grace)
        actions.append({"do": "cancel"})
    else:
        _terminate(s, t, actions)


def _on_ranks_failed(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["ending"] is not None or s["exit"] is not None:
        return
    s["ending"] = {"reason": "ranks_failed", "step": None, "deadline": None}
    _terminate(s, t, actions)


def _on_user_signal(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["exit"] is None and s["ending"] is None and s.get("user_signal") is None:
        s["user_signal"] = str(e.get("signal") or "SIGTERM")


def _on_exit(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["exit"] is not None:
        return
    s["exit"] = {"code": e.get("code"), "signal": e.get("signal")}
    s["drain_deadline"] = t + (s["config"]["drain_timeout"] or 0.0)
    actions.append({"do": "drain"})


def _on_drained(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["exit"] is not None:
        _finish(s, actions)


def _on_timer(s: State, e: Event, t: float, actions: list[Action]) -> None:
    if s["exit"] is not None:
        if t >= s["drain_deadline"]:
            _finish(s, actions)
        return
    ending = s["ending"]
    if ending is not None:
        if ending["deadline"] is not None and t >= ending["deadline"]:
            _advance_ending(s, t, actions)
        return
    for what, deadline in _watch_deadlines(s):
        if t < deadline:
            continue
        if what == "stalled":
            _set_state(s, "stalled", actions)
            continue
        if what in LOOKED_AT and s["look"] is not None:
            continue  # the other look's answer comes first
        if what in LOOKED_AT and (what != "startup" or not s["hello"]):
            # Evidence first (bridge/look.py): a tree with no Python yet, or one that works,
            # is starting; a beacon silent because its machine gives it no CPU is starved.
            # A launcher's hello keeps the plain startup deadline (its rendezvous).
            s["look"] = {"reason": what, "deadline": t + LOOK_TIMEOUT_S}
            actions.append({"do": "look", "reason": what})
            return
        if what == "look":
            what, s["look"] = s["look"]["reason"], None
        _hang(s, what, t, actions)
        return


_HANDLERS = {
    "hello": _on_hello,
    "stage": _on_stage,
    "progress": _on_progress,
    "beat": _on_beat,
    "paused": _on_paused,
    "held": _on_held,
    "output": _on_output,
    "error": _on_error,
    "bye": _on_bye,
    "lead": _on_lead,
    "dumped": _on_dumped,
    "signal_dumped": _on_signal_dumped,
    "snapshotted": _on_snapshotted,
    "refused": _on_refused,
    "no_worker": _on_no_worker,
    "looked": _on_looked,
    "worker_loaded": _on_worker_loaded,
    "cancel": _on_cancel,
    "cancel_refused": _on_cancel_refused,
    "ranks_failed": _on_ranks_failed,
    "user_signal": _on_user_signal,
    "exit": _on_exit,
    "drained": _on_drained,
    "timer": _on_timer,
}


# --- helpers --------------------------------------------------------------------------
def _set_state(s: State, name: str, actions: list[Action]) -> None:
    if s["state"] != name:
        s["state"] = name
        actions.append({"do": "state", "state": name})


def _beacon(s: State, t: float) -> None:
    s["last_msg_t"] = t
    if s["look"] is not None and s["look"]["reason"] == "heartbeat":
        s["look"] = None  # the beacon spoke: its silence is over, whatever the look finds


def _activity(s: State, t: float, actions: list[Action]) -> None:
    # Progress or a stage change: work moves, so a stalled job is running again.
    s["last_activity_t"] = t
    if s["look"] is not None and s["look"]["reason"] == "stall":
        s["look"] = None  # work moved while the shell looked: the look no longer matters
    if s["state"] == "stalled" and s["ending"] is None:
        _set_state(s, "running", actions)


def _watch_deadlines(s: State) -> list[tuple[str, float]]:
    """The deadlines watched while the job runs normally, in the order they are judged."""
    c = s["config"]
    out: list[tuple[str, float]] = []
    if s["exit"] is not None or s["ending"] is not None or s["state"] == "ended":
        return out
    held = s.get("held_since") is not None  # another queue holds the job: no start-up yet
    if not s["hello"] or s.get("awaiting_ranks"):
        if c["startup_timeout"] is not None and s["no_worker"] is None and not held:
            out.append(_or_look(s, "startup", s["startup_from"] + c["startup_timeout"]))
        # (a launcher's hello while its ranks start ends this: the launcher beats)
        if not s["hello"] and s.get("loaded_t") is not None and c["heartbeat_timeout"] is not None:
            out.append(_or_look(s, "heartbeat", s["loaded_t"] + c["heartbeat_timeout"]))
        return out
    if s["lead_gone"]:
        return out  # nobody speaks for the job: its exit decides
    budgets = [st["t"] + st["budget_s"] for st in s["stages"] if st.get("budget_s") is not None]
    if budgets and not held:
        out.append(("stage_budget", min(budgets)))
    if c["heartbeat_timeout"] is not None and s["last_msg_t"] is not None:
        reason = "after_bye" if s["bye"] is not None else "heartbeat"
        out.append(_or_look(s, reason, s["last_msg_t"] + c["heartbeat_timeout"]))
    if s["last_activity_t"] is not None and s["bye"] is None and not held:
        if c["stalled_after"] is not None and s["state"] == "running":
            out.append(("stalled", s["last_activity_t"] + c["stalled_after"]))
        if c["stall_timeout"] is not None:
            out.append(_or_look(s, "stall", s["last_activity_t"] + c["stall_timeout"]))
    return out


def _or_look(s: State, reason: str, deadline: float) -> tuple[str, float]:
    """A watched deadline, or the deadline of the look it is waiting on."""
    look = s["look"]
    if look is not None and look["reason"] == reason:
        return ("look", look["deadline"])
    return (reason, deadline)


def _hang(s: State, reason: str, t: float, actions: list[Action]) -> None:
    stage = s["stages"][-1]["name"] if s["stages"] else None
    s["hang"] = {"reason": reason, "t": t, "stage": stage}
    s["ending"] = {"reason": "hang", "step": None, "deadline": None}
    s["snapshot"] = "pending"
    actions.append({"do": "snapshot", "reason": reason})
    # In-band dump needs a live beacon; a silent one (GIL held, say) will not answer.
    if s["hello"] and reason not in ("heartbeat", "after_bye"):
        s["ending"].update(step="dump", deadline=t + s["config"]["dump_timeout"])
        actions.append({"do": "dump_stacks"})
    else:
        _after_dump(s, t, actions)


def _after_dump(s: State, t: float, actions: list[Action]) -> None:
    if s["dump_signal"]:
        s["ending"].update(step="signal_dump", deadline=t + s["config"]["signal_dump_wait"])
        actions.append({"do": "signal", "signal": "SIGUSR1"})
    else:
        _terminate(s, t, actions)


def _terminate(s: State, t: float, actions: list[Action]) -> None:
    # The evidence of a hang is read from the live process: do not kill it mid-snapshot.
    if s["snapshot"] == "pending":
        limit = s["hang"]["t"] + s["config"]["snapshot_timeout"]
        if t < limit:
            s["ending"].update(step="snapshot", deadline=limit)
            return
    s["ending"].update(step="term", deadline=t + s["config"]["kill_grace"])
    actions.append({"do": "signal", "signal": "SIGTERM"})


def _advance_ending(s: State, t: float, actions: list[Action]) -> None:
    step_name = s["ending"]["step"]
    if step_name == "dump":
        _after_dump(s, t, actions)
    elif step_name == "signal_dump" and s["native_dump"] and not s["answered"]:
        # Neither the beacon nor the main thread ran Python: native code holds the GIL.
        s["ending"].update(step="native_dump", deadline=t + s["config"]["signal_dump_wait"])
        actions.append({"do": "signal", "signal": "SIGUSR2"})
    elif step_name in ("signal_dump", "native_dump", "cancel", "exiting"):
        _terminate(s, t, actions)
    elif step_name == "snapshot":
        s["snapshot"] = "timed_out"
        _terminate(s, t, actions)
    elif step_name == "term":
        s["ending"].update(step="kill", deadline=None)  # the OS will report the exit
        actions.append({"do": "signal", "signal": "SIGKILL"})


def _finish(s: State, actions: list[Action]) -> None:
    s["outcome"] = outcome(s)
    s["ending"] = s["ending"] and {**s["ending"], "deadline": None}
    _set_state(s, "ended", actions)
    actions.append({"do": "finish", "outcome": s["outcome"]})


# The launchers whose ranks are their own children (torchrun's elastic agent starts each
# rank with Popen). A hello says which program a process runs in its argv.
LAUNCHER_SCRIPTS = ("torchrun",)
LAUNCHER_MODULES = (
    "torch.distributed.run",
    "torch.distributed.launch",
    "trainbridge.bridge.slurm_runner",
)
LAUNCHER_PATHS = ("torch/distributed/run.py", "torch/distributed/launch.py")
_OPTIONS_WITH_VALUE = ("-W", "-X", "-Q")


def is_launcher(hello: dict[str, Any]) -> bool:
    """Whether the hello's process runs a distributed launcher (torchrun,
    python -m torch.distributed.run/launch). Only the interpreter's own arguments count:
    `python train.py --via torchrun` is a training script, not a launcher."""
    argv = hello.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return False
    if _basename(argv[0]) in LAUNCHER_SCRIPTS:  # sys.argv form: the script itself first
        return True
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return i + 1 < len(argv) and argv[i + 1] in LAUNCHER_MODULES
        if arg == "-c" or arg == "-":
            return False
        if arg in _OPTIONS_WITH_VALUE:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        path = arg.replace("\\", "/")
        return _basename(path) in LAUNCHER_SCRIPTS or path.endswith(LAUNCHER_PATHS)
    return False


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _rank0(hello: dict[str, Any]) -> bool:
    return hello.get("rank") == 0 and hello.get("world_size") is not None


def choose_lead(
    present: list[dict[str, Any]], launched_pid: Optional[int], launched_loaded: bool = False
) -> Optional[int]:
    """Which of a job's worker processes speaks for it: its pid, or None when none is left
    (docs/CLIENT.md, "The lead process"; vectors/lead.json pins this).

    `present` lists the hellos (pid, ppid, rank, world_size, argv) of the job's processes
    that said hello and have not left, in the order they said it. The job's structure
    decides, never what a hello claims alone:
    - the launched process leads, unless it is a launcher (is_launcher) and one of its own
      children says it is distributed rank 0: then that rank leads;
    - when the launched process has no worker (a shell script, a launcher without Python),
      the top workers (those whose parent said no hello) stand in for it: if every one is
      a rank started by the same parent, rank 0 leads; otherwise the first of them to say
      hello is judged as the launched process would be.
    A rank 0 anywhere else (a script's own torchrun step) never leads.
    `launched_loaded`: the launched process has loaded the worker (its stage box exists) but
    its hello is not read yet. Then nobody stands in for it (None): a child it started can
    be read first (the socket takes its peers in turn, not in the order they spoke), and
    the lead must not depend on that."""
    # Pids of this host: a rank of another host (`remote`) may have any pid, the launched
    # process's or its parent's too.
    by_pid = {h.get("pid"): h for h in present if not h.get("remote")}
    top = by_pid.get(launched_pid) if launched_pid is not None else None
    if top is None and launched_loaded:
        return None
    if top is None:
        roots = [h for h in by_pid.values() if h.get("ppid") not in by_pid]
        if not roots:
            return None
        if len({h.get("ppid") for h in roots}) == 1 and all(
            h.get("world_size") is not None for h in roots
        ):
            for hello in roots:
                if _rank0(hello):
                    return hello.get("pid")
        top = roots[0]
    if is_launcher(top):
        for hello in present:
            if hello.get("ppid") == top.get("pid") and _rank0(hello):
                return hello.get("pid")
        # A launcher whose ranks run on other hosts (a Slurm job's runner: Slurm starts
        # them): the rank 0 that joined over the network leads. Its pid is another host's,
        # so it is told apart by `remote`, which only the client sets (job_messages).
        for hello in present:
            if hello.get("remote") and _rank0(hello):
                return hello.get("pid")
    return top.get("pid")


def outcome(s: State) -> str:
    """The one place that decides how a job ended (docs/CLIENT.md, "Outcomes")."""
    ending = s["ending"]
    if ending is not None and ending["reason"] == "cancel":
        return "cancelled"
    if ending is not None and ending["reason"] == "hang":
        return "hung"
    if ending is not None and ending["reason"] == "ranks_failed":
        return "failed"  # a rank of another host failed; the launcher here only waited
    if s.get("user_signal") is not None:
        return "cancelled"  # the user's own signal stopped it (states from before: .get)
    if s["refused"] is not None:
        return "failed"
    error = s["error"]
    if error is not None and not (error["kind"] == "system_exit" and not error["exit_code"]):
        return "failed"  # a fatal error is the cause, whatever the exit code says
    exit_ = s["exit"] or {}
    if exit_.get("signal"):
        return "crashed"
    if exit_.get("code") == 0:
        return "succeeded"
    if s["bye"] is not None or error is not None:
        return "failed"  # sys.exit(n): the worker said goodbye with a code
    if s["hello"]:
        return "crashed"  # a worker that said hello ended with no last words: os._exit(n)
    return "failed"  # a plain command's non-zero exit
