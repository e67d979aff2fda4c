"""Writes vectors/machine.json: trace tables for the job state machine (bridge/machine.py).

The expectations below are written by hand from the rules in docs/CLIENT.md ("State
machine", "Outcomes"); this script only expands the compact notation into JSON. The
committed JSON is the contract: tests/client/test_machine.py runs it.

A step is (t, event type, extra event fields, state after, actions, next deadline after).
Actions in short form: "state:X", "snapshot:REASON", "dump_stacks", "cancel",
"signal:SIG", "drain", "finish:OUTCOME".
"""

import json
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")

CONFIG = {
    "startup_timeout": 10,
    "heartbeat_timeout": 3,
    "stall_timeout": 6,
    "stalled_after": 2,
    "kill_grace": 1,
    "cancel_grace": 2,
    "dump_timeout": 0.5,
    "signal_dump_wait": 0.25,
    "snapshot_timeout": 1.5,
    "drain_timeout": 0.5,
}
RUN, STALL, START, END = "running", "stalled", "starting", "ended"
HELLO = {"dump_signal": False}
HELLO_SIG = {"dump_signal": True}
HELLO_NATIVE = {"dump_signal": True, "native_dump": True}  # SIGUSR1 and SIGUSR2 registered
LOOK_HB = {"reason": "heartbeat", "working": False}  # the look saw no wait for a CPU: hung
LOOK_STALL = {"reason": "stall", "working": False}  # the look saw no work: hung

# A job stalled since its progress at 1.5 whose stall deadline (6) passed at 7.5: the machine
# asked the shell to look.
STALL_LOOKED_AT = [
    (1, "hello", HELLO, RUN, ["state:running"], 4),
    (1.5, "progress", {}, RUN, [], 3.5),
    (3, "beat", {}, RUN, [], 3.5),
    (3.5, "timer", {}, STALL, ["state:stalled"], 6),
    (5, "beat", {}, STALL, [], 7.5),
    (7, "beat", {}, STALL, [], 7.5),
    (7.5, "timer", {}, STALL, ["look:stall"], 10),
]


def ex(code=None, signal=None):
    return {"code": code, "signal": signal}


CASES = [
    (
        "succeeded: progress, bye, exit 0",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (2, "progress", {}, RUN, [], 4),
            (3, "bye", {"reason": "normal", "exit_code": 0}, RUN, [], 6),
            (3.5, "exit", ex(0), RUN, ["drain"], 4.0),
            (3.6, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "failed: uncaught exception in a stage",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (1.5, "stage", {"event": "begin", "name": "train"}, RUN, [], 3.5),
            (2, "error", {"fatal": True, "kind": "exception"}, RUN, [], 3.5),
            (2.1, "bye", {"reason": "after_error", "exit_code": 1}, RUN, [], 5.1),
            (2.2, "exit", ex(1), RUN, ["drain"], 2.7),
            (2.3, "drained", {}, END, ["state:ended", "finish:failed"], None),
        ],
        "failed",
        None,
    ),
    (
        "failed: exit 0 after a fatal error; drain ends on its deadline",
        {},
        10,
        [
            (0.5, "hello", HELLO, RUN, ["state:running"], 3.5),
            (1, "error", {"fatal": True, "kind": "exception"}, RUN, [], 4),
            (1.2, "exit", ex(0), RUN, ["drain"], 1.7),
            (1.7, "timer", {}, END, ["state:ended", "finish:failed"], None),
        ],
        "failed",
        None,
    ),
    (
        "succeeded: SystemExit(0)",
        {},
        10,
        [
            (0.5, "hello", HELLO, RUN, ["state:running"], 3.5),
            (1, "error", {"fatal": True, "kind": "system_exit", "exit_code": 0}, RUN, [], 4),
            (1.1, "bye", {"reason": "sys_exit", "exit_code": 0}, RUN, [], 4.1),
            (1.2, "exit", ex(0), RUN, ["drain"], 1.7),
            (1.3, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "failed: sys.exit(3)",
        {},
        10,
        [
            (0.5, "hello", HELLO, RUN, ["state:running"], 3.5),
            (1, "bye", {"reason": "sys_exit", "exit_code": 3}, RUN, [], 4),
            (1.1, "exit", ex(3), RUN, ["drain"], 1.6),
            (1.2, "drained", {}, END, ["state:ended", "finish:failed"], None),
        ],
        "failed",
        None,
    ),
    (
        "crashed: SIGSEGV with no last words",
        {},
        10,
        [
            (0.5, "hello", HELLO_SIG, RUN, ["state:running"], 3.5),
            (1, "progress", {}, RUN, [], 3),
            (1.5, "exit", ex(None, "SIGSEGV"), RUN, ["drain"], 2.0),
            (2.0, "timer", {}, END, ["state:ended", "finish:crashed"], None),
        ],
        "crashed",
        None,
    ),
    (
        "crashed: os._exit(7) after hello",
        {},
        10,
        [
            (0.5, "hello", HELLO, RUN, ["state:running"], 3.5),
            (1, "beat", {}, RUN, [], 4),
            (1.2, "exit", ex(7), RUN, ["drain"], 1.7),
            (1.3, "drained", {}, END, ["state:ended", "finish:crashed"], None),
        ],
        "crashed",
        None,
    ),
    (
        "succeeded: os._exit(0) after hello",
        {},
        10,
        [
            (0.5, "hello", HELLO, RUN, ["state:running"], 3.5),
            (1.2, "exit", ex(0), RUN, ["drain"], 1.7),
            (1.3, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "failed: a plain command exits 2",
        {},
        10,
        [
            (0.5, "exit", ex(2), START, ["drain"], 1.0),
            (0.6, "drained", {}, END, ["state:ended", "finish:failed"], None),
        ],
        "failed",
        None,
    ),
    (
        "succeeded: a plain command exits 0",
        {},
        10,
        [
            (0.5, "exit", ex(0), START, ["drain"], 1.0),
            (0.6, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "crashed: a plain command killed by SIGKILL",
        {},
        10,
        [
            (0.5, "exit", ex(None, "SIGKILL"), START, ["drain"], 1.0),
            (0.6, "drained", {}, END, ["state:ended", "finish:crashed"], None),
        ],
        "crashed",
        None,
    ),
    (
        "hung: no hello before the startup deadline, the look saw nothing move; SIGTERM ignored",
        {},
        10,
        [
            (9.9, "timer", {}, START, [], 10),
            (10, "timer", {}, START, ["look:startup"], 15),
            (
                11,
                "looked",
                {"reason": "startup", "working": False},
                START,
                ["snapshot:startup"],
                12.5,
            ),
            (11.5, "snapshotted", {}, START, ["signal:SIGTERM"], 12.5),
            (12.5, "timer", {}, START, ["signal:SIGKILL"], None),
            (12.6, "exit", ex(None, "SIGKILL"), START, ["drain"], 13.1),
            (12.7, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "startup", "t": 11, "stage": None},
    ),
    (
        "starting, not hung: the look at the startup deadline saw work, the deadline runs again",
        {},
        10,
        [
            (10, "timer", {}, START, ["look:startup"], 15),
            (11, "looked", {"reason": "startup", "working": True}, START, [], 21),
            (21, "timer", {}, START, ["look:startup"], 26),
            (22, "looked", {"reason": "startup", "working": True}, START, [], 32),
            (25, "hello", HELLO, RUN, ["state:running"], 28),
        ],
        None,
        None,
    ),
    (
        "a hello while the shell looks: the answer comes too late to matter",
        {},
        10,
        [
            (10, "timer", {}, START, ["look:startup"], 15),
            (10.5, "hello", HELLO, RUN, ["state:running"], 13.5),
            (11, "looked", {"reason": "startup", "working": False}, RUN, [], 13.5),
        ],
        None,
        None,
    ),
    (
        "hung: startup; the shell never answered the look, so its deadline decides",
        {},
        10,
        [
            (10, "timer", {}, START, ["look:startup"], 15),
            (15, "timer", {}, START, ["snapshot:startup"], 16.5),
            (15.1, "exit", ex(None, "SIGKILL"), START, ["drain"], 15.6),
            (15.2, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "startup", "t": 15, "stage": None},
    ),
    (
        "a distributed launcher's hello does not end start-up; its first rank's does",
        {},
        10,
        [
            (1, "hello", {"dump_signal": False, "awaits_ranks": True}, START, [], 10),
            (2, "beat", {}, START, [], 10),
            (4, "hello", HELLO, RUN, ["state:running"], 7),
        ],
        None,
        None,
    ),
    (
        "hung: a launcher said hello, no rank did before the startup deadline (rendezvous)",
        {},
        10,
        [
            (1, "hello", {"dump_signal": False, "awaits_ranks": True}, START, [], 10),
            (10, "timer", {}, START, ["snapshot:startup", "dump_stacks"], 10.5),
            (10.2, "dumped", {}, START, [], 11.5),
            (10.3, "snapshotted", {}, START, ["signal:SIGTERM"], 11.3),
            (10.4, "exit", ex(None, "SIGTERM"), START, ["drain"], 10.9),
            (10.5, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "startup", "t": 10, "stage": None},
    ),
    (
        "hung: startup; the snapshot overruns its time; the process dies on SIGTERM",
        {},
        10,
        [
            (10, "timer", {}, START, ["look:startup"], 15),
            (
                11,
                "looked",
                {"reason": "startup", "working": False},
                START,
                ["snapshot:startup"],
                12.5,
            ),
            (12.5, "timer", {}, START, ["signal:SIGTERM"], 13.5),
            (12.6, "snapshotted", {}, START, [], 13.5),
            (12.7, "exit", ex(None, "SIGTERM"), START, ["drain"], 13.2),
            (12.8, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "startup", "t": 11, "stage": None},
    ),
    (
        "hung: stage budget; in-band dump answered, then SIGUSR1",
        {},
        10,
        [
            (0.5, "hello", HELLO_SIG, RUN, ["state:running"], 3.5),
            (1, "stage", {"event": "begin", "name": "data", "budget_s": 2}, RUN, [], 3),
            (2, "beat", {}, RUN, [], 3),
            (3, "timer", {}, RUN, ["snapshot:stage_budget", "dump_stacks"], 3.5),
            (3.1, "dumped", {}, RUN, ["signal:SIGUSR1"], 3.35),
            (3.35, "timer", {}, RUN, [], 4.5),
            (3.6, "snapshotted", {}, RUN, ["signal:SIGTERM"], 4.6),
            (3.7, "exit", ex(None, "SIGTERM"), RUN, ["drain"], 4.2),
            (3.8, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "stage_budget", "t": 3, "stage": "data"},
    ),
    (
        "hung: stall while beats arrive; stalled and back to running first",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "progress", {}, RUN, [], 3),
            (2, "beat", {}, RUN, [], 3),
            (3, "timer", {}, STALL, ["state:stalled"], 5),
            (3.5, "progress", {}, RUN, ["state:running"], 5.5),
            (4.5, "beat", {}, RUN, [], 5.5),
            (5.5, "timer", {}, STALL, ["state:stalled"], 7.5),
            (6, "beat", {}, STALL, [], 9),
            (7.5, "beat", {}, STALL, [], 9.5),
            (9, "beat", {}, STALL, [], 9.5),
            (9.5, "timer", {}, STALL, ["look:stall"], 12.0),
            (9.5, "looked", LOOK_STALL, STALL, ["snapshot:stall", "dump_stacks"], 10),
            (9.9, "snapshotted", {}, STALL, [], 10),
            (10, "timer", {}, STALL, ["signal:SIGTERM"], 11),
            (11, "timer", {}, STALL, ["signal:SIGKILL"], None),
            (11.2, "exit", ex(None, "SIGKILL"), STALL, ["drain"], 11.7),
            (11.7, "timer", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "stall", "t": 9.5, "stage": None},
    ),
    (
        "hung: heartbeat silence (GIL held); no in-band dump, SIGUSR1",
        {},
        10,
        [
            (0, "hello", HELLO_SIG, RUN, ["state:running"], 3),
            (0.5, "progress", {}, RUN, [], 2.5),
            (2.5, "timer", {}, STALL, ["state:stalled"], 3.5),
            (3.5, "timer", {}, STALL, ["look:heartbeat"], 6.5),
            (4.5, "looked", LOOK_HB, STALL, ["snapshot:heartbeat", "signal:SIGUSR1"], 4.75),
            (4.7, "snapshotted", {}, STALL, [], 4.75),
            (4.75, "timer", {}, STALL, ["signal:SIGTERM"], 5.75),
            (5, "exit", ex(None, "SIGTERM"), STALL, ["drain"], 5.5),
            (5.1, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "heartbeat", "t": 4.5, "stage": None},
    ),
    (
        "hung: stall; neither dump_stacks nor SIGUSR1 answered (native code holds the GIL), "
        "then SIGUSR2",
        {},
        10,
        [
            (0, "hello", HELLO_NATIVE, RUN, ["state:running"], 3),
            (0.5, "progress", {}, RUN, [], 2.5),
            (2, "beat", {}, RUN, [], 2.5),
            (4, "beat", {}, RUN, [], 2.5),
            (6, "beat", {}, RUN, [], 2.5),
            (6.5, "timer", {}, STALL, ["state:stalled", "look:stall"], 9.0),
            (6.5, "looked", LOOK_STALL, STALL, ["snapshot:stall", "dump_stacks"], 7.0),
            (7.0, "timer", {}, STALL, ["signal:SIGUSR1"], 7.25),
            (7.25, "timer", {}, STALL, ["signal:SIGUSR2"], 7.5),
            (7.3, "snapshotted", {}, STALL, [], 7.5),
            (7.5, "timer", {}, STALL, ["signal:SIGTERM"], 8.5),
            (7.6, "exit", ex(None, "SIGTERM"), STALL, ["drain"], 8.1),
            (7.7, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "stall", "t": 6.5, "stage": None},
    ),
    (
        "hung: stall; dump_stacks unanswered but the SIGUSR1 handler wrote: no SIGUSR2",
        {},
        10,
        [
            (0, "hello", HELLO_NATIVE, RUN, ["state:running"], 3),
            (0.5, "progress", {}, RUN, [], 2.5),
            (2, "beat", {}, RUN, [], 2.5),
            (4, "beat", {}, RUN, [], 2.5),
            (6, "beat", {}, RUN, [], 2.5),
            (6.5, "timer", {}, STALL, ["state:stalled", "look:stall"], 9.0),
            (6.5, "looked", LOOK_STALL, STALL, ["snapshot:stall", "dump_stacks"], 7.0),
            (7.0, "timer", {}, STALL, ["signal:SIGUSR1"], 7.25),
            (7.1, "signal_dumped", {}, STALL, [], 7.25),
            (7.2, "snapshotted", {}, STALL, [], 7.25),
            (7.25, "timer", {}, STALL, ["signal:SIGTERM"], 8.25),
            (7.6, "exit", ex(None, "SIGTERM"), STALL, ["drain"], 8.1),
            (7.7, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "stall", "t": 6.5, "stage": None},
    ),
    (
        "hung: heartbeat silence; SIGUSR1 unanswered, then SIGUSR2, then SIGTERM once snapshotted",
        {},
        10,
        [
            (0, "hello", HELLO_NATIVE, RUN, ["state:running"], 3),
            (0.5, "progress", {}, RUN, [], 2.5),
            (2.5, "timer", {}, STALL, ["state:stalled"], 3.5),
            (3.5, "timer", {}, STALL, ["look:heartbeat"], 6.5),
            (4.5, "looked", LOOK_HB, STALL, ["snapshot:heartbeat", "signal:SIGUSR1"], 4.75),
            (4.75, "timer", {}, STALL, ["signal:SIGUSR2"], 5.0),
            (5.0, "timer", {}, STALL, [], 6.0),
            (5.1, "snapshotted", {}, STALL, ["signal:SIGTERM"], 6.1),
            (5.2, "exit", ex(None, "SIGTERM"), STALL, ["drain"], 5.7),
            (5.3, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "heartbeat", "t": 4.5, "stage": None},
    ),
    (
        "waiting for a free core: the heartbeat look sees the lead starved; its deadline runs "
        "again",
        {},
        10,
        [
            (0, "hello", HELLO_SIG, RUN, ["state:running"], 3),
            (3, "timer", {}, RUN, ["look:heartbeat"], 8),
            (4, "looked", {"reason": "heartbeat", "working": True}, RUN, [], 7),
            (5, "beat", {}, RUN, [], 8),
        ],
        None,
        None,
    ),
    (
        "a beat while the shell looks: the silence is over, and the late answer changes nothing",
        {},
        10,
        [
            (0, "hello", HELLO_SIG, RUN, ["state:running"], 3),
            (3, "timer", {}, RUN, ["look:heartbeat"], 8),
            (3.5, "beat", {}, RUN, [], 6.5),
            (4, "looked", LOOK_HB, RUN, [], 6.5),
        ],
        None,
        None,
    ),
    (
        "hung: bye sent but the process does not exit",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "bye", {"reason": "normal", "exit_code": 0}, RUN, [], 4),
            (4, "timer", {}, RUN, ["snapshot:after_bye"], 5.5),
            (4.2, "snapshotted", {}, RUN, ["signal:SIGTERM"], 5.2),
            (4.3, "exit", ex(None, "SIGTERM"), RUN, ["drain"], 4.8),
            (4.4, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "after_bye", "t": 4, "stage": None},
    ),
    (
        "cancelled: the worker stops on the in-band cancel",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (0.5, "progress", {}, RUN, [], 2.5),
            (1, "cancel", {}, RUN, ["cancel"], 3),
            (1.1, "error", {"fatal": True, "kind": "keyboard_interrupt"}, RUN, [], 3),
            # the bye: Python's shutdown is under way; its teardown gets a grace of its own
            (1.2, "bye", {"reason": "after_error", "exit_code": 1}, RUN, [], 3.2),
            (1.3, "exit", ex(1), RUN, ["drain"], 1.8),
            (1.4, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "held in another scheduler's queue (a Slurm job PENDING): a launcher's start-up "
        "waits while it is held, however long, and goes on from where it was",
        {},
        10,
        [
            (0, "hello", {"dump_signal": False, "awaits_ranks": True}, START, [], 10),
            (1, "held", {"held": True}, START, [], None),
            (4, "beat", {}, START, [], None),
            (10, "timer", {}, START, [], None),  # a whole startup_timeout held: no hang
            # released at 10.5 after 9.5 s held: the start-up deadline (10) moves to 19.5
            (10.5, "held", {"held": False}, START, [], 19.5),
            (15, "beat", {}, START, [], 19.5),
            (19.5, "timer", {}, START, ["snapshot:startup", "dump_stacks"], 20),
        ],
        None,
        {"reason": "startup", "t": 19.5, "stage": None},
    ),
    (
        "the supervisor's own pause is not the worker's silence (a SIGSTOPped keeper)",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (0.5, "progress", {}, RUN, [], 2.5),
            (1, "beat", {}, RUN, [], 2.5),
            # stopped from 1.2 to 7.2: the deadlines move on by the 6 s the judge did not run
            (7.2, "paused", {"paused_s": 6}, RUN, [], 8.5),
            (7.2, "timer", {}, RUN, [], 8.5),
            (7.3, "beat", {}, RUN, [], 8.5),
            (7.4, "progress", {}, RUN, [], 9.4),
        ],
        None,
        None,
    ),
    (
        "cancelled: a slow teardown after the bye is waited for, not cut by SIGTERM",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "cancel", {}, RUN, ["cancel"], 3),
            (2.5, "bye", {"reason": "cancelled", "exit_code": 1}, RUN, [], 4.5),
            (3, "timer", {}, RUN, [], 4.5),  # the cancel's own grace ran out: no SIGTERM
            (4.2, "exit", ex(1), RUN, ["drain"], 4.7),
            (4.3, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "cancelled: a teardown that hangs after the bye gets SIGTERM at its grace",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            # a cancel's short grace is for stopping the script; the teardown gets cancel_grace
            (1, "cancel", {"grace": 0.5}, RUN, ["cancel"], 1.5),
            (1.2, "bye", {"reason": "cancelled", "exit_code": 1}, RUN, [], 3.2),
            (3.2, "timer", {}, RUN, ["signal:SIGTERM"], 4.2),
            (3.5, "exit", ex(None, "SIGTERM"), RUN, ["drain"], 4),
            (3.6, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "cancelled: in-band cancel ignored, then SIGTERM and SIGKILL",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "cancel", {"grace": 0.5}, RUN, ["cancel"], 1.5),
            (1.5, "timer", {}, RUN, ["signal:SIGTERM"], 2.5),
            (2, "cancel", {}, RUN, [], 2.5),
            (2.5, "timer", {}, RUN, ["signal:SIGKILL"], None),
            (2.6, "exit", ex(None, "SIGKILL"), RUN, ["drain"], 3.1),
            (2.7, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "cancelled: the worker refuses the in-band cancel, so SIGTERM at once",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "cancel", {}, RUN, ["cancel"], 3),
            (
                1.1,
                "cancel_refused",
                {"reason": "SIGINT is not handled by Python here"},
                RUN,
                ["signal:SIGTERM"],
                2.1,
            ),
            (1.2, "cancel_refused", {"reason": "a second process refused too"}, RUN, [], 2.1),
            (1.3, "exit", ex(None, "SIGTERM"), RUN, ["drain"], 1.8),
            (1.4, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "failed: every rank ended, one of another host failed; torchrun here only waits",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "ranks_failed", {}, RUN, ["signal:SIGTERM"], 2),
            (1.5, "ranks_failed", {}, RUN, [], 2),
            (2, "timer", {}, RUN, ["signal:SIGKILL"], None),
            (2.1, "exit", ex(None, "SIGKILL"), RUN, ["drain"], 2.6),
            (2.2, "drained", {}, END, ["state:ended", "finish:failed"], None),
        ],
        "failed",
        None,
    ),
    (
        "ranks_failed while a cancel runs changes nothing: cancelled",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "cancel", {}, RUN, ["cancel"], 3),
            (1.1, "ranks_failed", {}, RUN, [], 3),
            (1.3, "exit", ex(1), RUN, ["drain"], 1.8),
            (1.4, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "a refusal without a cancel in flight changes nothing",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "cancel_refused", {"reason": "stale"}, RUN, [], 3),
        ],
        None,
        None,
    ),
    (
        "cancelled before hello: straight to SIGTERM",
        {},
        10,
        [
            (0.2, "cancel", {}, START, ["signal:SIGTERM"], 1.2),
            (0.3, "exit", ex(None, "SIGTERM"), START, ["drain"], 0.8),
            (0.4, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "cancelled: the user's own SIGINT (forwarded by run --transparent); exit 1",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (2, "user_signal", {"signal": "SIGINT"}, RUN, [], 4),
            (2.1, "error", {"fatal": True, "kind": "exception"}, RUN, [], 5.1),
            (2.2, "bye", {"reason": "after_error", "exit_code": 1}, RUN, [], 5.2),
            (2.3, "exit", ex(1), RUN, ["drain"], 2.8),
            (2.4, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "cancelled: a plain command the user sent SIGTERM dies by it; no escalation",
        {},
        10,
        [
            (0.5, "user_signal", {"signal": "SIGTERM"}, START, [], 10),
            (0.6, "exit", ex(None, "SIGTERM"), START, ["drain"], 1.1),
            (0.7, "drained", {}, END, ["state:ended", "finish:cancelled"], None),
        ],
        "cancelled",
        None,
    ),
    (
        "a user signal after the exit changes nothing",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (2, "exit", ex(None, "SIGSEGV"), RUN, ["drain"], 2.5),
            (2.1, "user_signal", {"signal": "SIGTERM"}, RUN, [], 2.5),
            (2.2, "drained", {}, END, ["state:ended", "finish:crashed"], None),
        ],
        "crashed",
        None,
    ),
    (
        "a process that cannot load the worker turns the startup deadline off",
        {},
        10,
        [
            (0.2, "no_worker", {"reason": "No module named 'worker'"}, START, [], None),
            (10, "timer", {}, START, [], None),
            (30, "exit", ex(0), START, ["drain"], 30.5),
            (30.1, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "failed: the worker speaks an unsupported protocol version",
        {},
        10,
        [
            (0.3, "refused", {"reason": "v2"}, START, ["signal:SIGTERM"], 1.3),
            (0.4, "exit", ex(None, "SIGTERM"), START, ["drain"], 0.9),
            (0.5, "drained", {}, END, ["state:ended", "finish:failed"], None),
        ],
        "failed",
        None,
    ),
    (
        "failed: last words arrive while draining",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "exit", ex(1), RUN, ["drain"], 1.5),
            (1.1, "error", {"fatal": True, "kind": "exception"}, RUN, [], 1.5),
            (1.2, "drained", {}, END, ["state:ended", "finish:failed"], None),
        ],
        "failed",
        None,
    ),
    (
        "hung: the process exits during the stack dump",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "stage", {"event": "begin", "name": "load", "budget_s": 1}, RUN, [], 2),
            (2, "timer", {}, RUN, ["snapshot:stage_budget", "dump_stacks"], 2.5),
            (2.1, "exit", ex(1), RUN, ["drain"], 2.6),
            (2.2, "dumped", {}, RUN, [], 2.6),
            (2.25, "snapshotted", {}, RUN, [], 2.6),
            (2.3, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "stage_budget", "t": 2, "stage": "load"},
    ),
    (
        "nested stages: a closed stage's budget no longer counts",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (0.5, "stage", {"event": "begin", "name": "outer", "budget_s": 100}, RUN, [], 2.5),
            (1, "stage", {"event": "begin", "name": "inner", "budget_s": 1}, RUN, [], 2),
            (1.5, "stage", {"event": "end", "name": "inner"}, RUN, [], 3.5),
            (3.5, "timer", {}, STALL, ["state:stalled"], 4.5),
            (4, "stage", {"event": "end", "name": "outer"}, RUN, ["state:running"], 6),
            (4.5, "bye", {"reason": "normal", "exit_code": 0}, RUN, [], 7.5),
            (5, "exit", ex(0), RUN, ["drain"], 5.5),
            (5.1, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "same stage name at two depths: the end's depth says which closes",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (
                0.5,
                "stage",
                {"event": "begin", "name": "train", "depth": 0, "budget_s": 100},
                RUN,
                [],
                2.5,
            ),
            (
                1,
                "stage",
                {"event": "begin", "name": "train", "depth": 1, "budget_s": 1},
                RUN,
                [],
                2,
            ),
            (1.5, "stage", {"event": "end", "name": "train", "depth": 0}, RUN, [], 3.5),
            (2.5, "bye", {"reason": "normal", "exit_code": 0}, RUN, [], 5.5),
            (3, "exit", ex(0), RUN, ["drain"], 3.5),
            (3.1, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "succeeded: a non-fatal error does not fail the job",
        {},
        10,
        [
            (0, "hello", HELLO, RUN, ["state:running"], 3),
            (1, "error", {"fatal": False, "kind": "exception"}, RUN, [], 4),
            (2, "exit", ex(0), RUN, ["drain"], 2.5),
            (2.1, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "deadlines can be disabled",
        {
            "startup_timeout": None,
            "heartbeat_timeout": None,
            "stalled_after": None,
            "stall_timeout": None,
        },
        None,
        [
            (1, "hello", HELLO, RUN, ["state:running"], None),
            (2, "progress", {}, RUN, [], None),
            (100, "timer", {}, RUN, [], None),
            (101, "exit", ex(0), RUN, ["drain"], 101.5),
            (101.1, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "events after the end change nothing; a second exit is ignored",
        {},
        10,
        [
            (0.5, "exit", ex(0), START, ["drain"], 1.0),
            (0.55, "exit", ex(None, "SIGKILL"), START, [], 1.0),
            (0.6, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
            (0.7, "progress", {}, END, [], None),
            (0.8, "cancel", {}, END, [], None),
            (0.9, "timer", {}, END, [], None),
        ],
        "succeeded",
        None,
    ),
    # Output is activity only while the job has no progress source.
    (
        "running: output keeps a job with no progress source from stalling",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (1.5, "stage", {"event": "begin", "name": "main"}, RUN, [], 3.5),
            (2, "beat", {}, RUN, [], 3.5),
            (3, "output", {}, RUN, [], 5),
            (4, "beat", {}, RUN, [], 5),
            (4.5, "output", {}, RUN, [], 6.5),
            (6, "beat", {}, RUN, [], 6.5),
            (6.5, "timer", {}, STALL, ["state:stalled"], 9),
            (7, "output", {}, RUN, ["state:running"], 9),
            (7.5, "exit", ex(0), RUN, ["drain"], 8.0),
            (7.6, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "hung: output does not hide a stall once progress was seen",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (1.5, "progress", {}, RUN, [], 3.5),
            (2.5, "output", {}, RUN, [], 3.5),
            (3.5, "timer", {}, STALL, ["state:stalled"], 4.5),
            (4, "beat", {}, STALL, [], 7),
            (5, "output", {}, STALL, [], 7),
            (6.5, "beat", {}, STALL, [], 7.5),
            (7, "output", {}, STALL, [], 7.5),
            (7.5, "timer", {}, STALL, ["look:stall"], 9.5),
            (7.5, "looked", LOOK_STALL, STALL, ["snapshot:stall", "dump_stacks"], 8.0),
            (7.8, "dumped", {}, STALL, [], 9.0),
        ],
        None,
        {"reason": "stall", "t": 7.5, "stage": None},
    ),
    (
        "output alone never arms the stall deadlines",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (2, "output", {}, RUN, [], 4),
            (3, "beat", {}, RUN, [], 6),
        ],
        None,
        None,
    ),
    # Training that is alive is not killed as hung.
    (
        "a heartbeat that counted more backward() calls is activity: a loop that updates its "
        "weights by hand trains",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (1.5, "progress", {}, RUN, [], 3.5),
            (3, "beat", {"work": True}, RUN, [], 5),
            (5, "timer", {}, STALL, ["state:stalled"], 6),
            (6, "beat", {"work": True}, RUN, ["state:running"], 8),
            (7, "beat", {}, RUN, [], 8),
        ],
        None,
        None,
    ),
    (
        "a heartbeat's work never arms the stall deadlines",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (2, "beat", {"work": True}, RUN, [], 5),
        ],
        None,
        None,
    ),
    (
        "computing: the stall look saw the busy main thread move; the stall deadline runs from "
        "when it last moved",
        {},
        10,
        [
            *STALL_LOOKED_AT,
            (
                8.5,
                "looked",
                {"reason": "stall", "working": True, "since": 7.0},
                RUN,
                ["state:running"],
                9.0,
            ),
        ],
        None,
        None,
    ),
    (
        "computing, but it last moved stalled_after ago: still stalled, and the stall deadline "
        "runs from when it moved",
        {},
        10,
        [
            *STALL_LOOKED_AT,
            (8.5, "looked", {"reason": "stall", "working": True, "since": 6.0}, STALL, [], 10),
        ],
        None,
        None,
    ),
    (
        "hung: the stall look saw it move, but a whole stall_timeout ago",
        {},
        10,
        [
            *STALL_LOOKED_AT,
            (
                8.5,
                "looked",
                {"reason": "stall", "working": True, "since": 1.0},
                STALL,
                ["snapshot:stall", "dump_stacks"],
                9.0,
            ),
        ],
        None,
        {"reason": "stall", "t": 8.5, "stage": None},
    ),
    (
        "progress while the shell looks at a stall: the late answer changes nothing",
        {},
        10,
        [
            *STALL_LOOKED_AT,
            (8, "progress", {}, RUN, ["state:running"], 10),
            (8.5, "looked", LOOK_STALL, RUN, [], 10),
        ],
        None,
        None,
    ),
    (
        "the lead passes on while the shell looks at a stall: that look was of the leaver",
        {},
        10,
        [
            *STALL_LOOKED_AT,
            (8, "lead", {"present": True}, RUN, ["state:running"], 10),
            (8.5, "looked", LOOK_STALL, RUN, [], 10),
        ],
        None,
        None,
    ),
    # The worker loaded (stage box) but the GIL is held before hello.
    (
        "hung: worker loaded, no hello: heartbeat deadline, SIGUSR1 dump, no in-band dump",
        {},
        10,
        [
            (0.8, "worker_loaded", {"dump_signal": True}, START, [], 3.8),
            (3.8, "timer", {}, START, ["look:heartbeat"], 8.8),
            (4.8, "looked", LOOK_HB, START, ["snapshot:heartbeat", "signal:SIGUSR1"], 5.05),
            (4.9, "snapshotted", {}, START, [], 5.05),
            (5.05, "timer", {}, START, ["signal:SIGTERM"], 6.05),
            (5.2, "exit", ex(None, "SIGTERM"), START, ["drain"], 5.7),
            (5.3, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "heartbeat", "t": 4.8, "stage": None},
    ),
    (
        "hung: worker loaded, no hello, SIGUSR1 unanswered (GIL held): then SIGUSR2, the "
        "native dump",
        {},
        10,
        [
            (0.8, "worker_loaded", {"dump_signal": True, "native_dump": True}, START, [], 3.8),
            (3.8, "timer", {}, START, ["look:heartbeat"], 8.8),
            (4.8, "looked", LOOK_HB, START, ["snapshot:heartbeat", "signal:SIGUSR1"], 5.05),
            (5.05, "timer", {}, START, ["signal:SIGUSR2"], 5.3),
            (5.1, "snapshotted", {}, START, [], 5.3),
            (5.3, "timer", {}, START, ["signal:SIGTERM"], 6.3),
            (5.4, "exit", ex(None, "SIGTERM"), START, ["drain"], 5.9),
            (5.5, "drained", {}, END, ["state:ended", "finish:hung"], None),
        ],
        "hung",
        {"reason": "heartbeat", "t": 4.8, "stage": None},
    ),
    (
        "worker loaded then hello: the normal deadlines",
        {},
        10,
        [
            (0.5, "worker_loaded", {"dump_signal": False}, START, [], 3.5),
            (0.6, "hello", HELLO, RUN, ["state:running"], 3.6),
        ],
        None,
        None,
    ),
    (
        "succeeded: rank 0 said bye, its launcher leads again and ends the job",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (2, "progress", {}, RUN, [], 4),
            (3, "bye", {"reason": "normal", "exit_code": 0}, RUN, [], 6),
            # the leaver's bye is forgotten; the new lead's clocks start now
            (3.2, "lead", {"present": True}, RUN, [], 5.2),
            (4, "beat", {}, RUN, [], 5.2),
            (4.5, "exit", ex(0), RUN, ["drain"], 5.0),
            (4.6, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
    (
        "a stalled job whose lead passes on runs again; the leaver's stage budget went with it",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (1.5, "stage", {"event": "begin", "name": "eval", "budget_s": 4}, RUN, [], 3.5),
            (3, "beat", {}, RUN, [], 3.5),
            (3.5, "timer", {}, STALL, ["state:stalled"], 5.5),
            # without the hand-over the budget would end the job at 5.5 (stage_budget)
            (4, "lead", {"present": True}, RUN, ["state:running"], 6),
            (5, "beat", {}, RUN, [], 6),
            (6, "timer", {}, STALL, ["state:stalled"], 8),
            (7.5, "beat", {}, STALL, [], 10),
            (10, "timer", {}, STALL, ["look:stall"], 10.5),
            (10, "looked", LOOK_STALL, STALL, ["snapshot:stall", "dump_stacks"], 10.5),
        ],
        None,
        {"reason": "stall", "t": 10, "stage": None},
    ),
    (
        "lead gone: nobody speaks for the job, its exit decides",
        {},
        10,
        [
            (1, "hello", HELLO, RUN, ["state:running"], 4),
            (2, "bye", {"reason": "normal", "exit_code": 0}, RUN, [], 5),
            (2.1, "lead", {"present": False}, RUN, [], None),
            (60, "timer", {}, RUN, [], None),
            (61, "hello", HELLO, RUN, [], 64),
            (62, "exit", ex(0), RUN, ["drain"], 62.5),
            (62.1, "drained", {}, END, ["state:ended", "finish:succeeded"], None),
        ],
        "succeeded",
        None,
    ),
]


def action(short):
    name, _, arg = short.partition(":")
    key = {
        "state": "state",
        "snapshot": "reason",
        "signal": "signal",
        "finish": "outcome",
        "look": "reason",
    }.get(name)
    return {"do": name, key: arg} if key else {"do": name}


def live_looks(config, steps):
    """live_look_due() after each step, as the Python machine says (reviewed: true only while
    stalled with no ending and no exit)."""
    from trainbridge.bridge import machine

    state, out = machine.initial(config, 0), []
    for t, kind, fields, *_ in steps:
        state, _ = machine.step(state, {"type": kind, "t": t, **fields})
        out.append(machine.live_look_due(state))
    return out


def main():
    cases = []
    for name, overrides, initial_deadline, steps, outcome, hang in CASES:
        looks = live_looks({**CONFIG, **overrides}, steps)
        cases.append(
            {
                "name": name,
                "config": {**CONFIG, **overrides},
                "t0": 0,
                "initial": {"state": "starting", "deadline": initial_deadline},
                "steps": [
                    {
                        "event": {"type": kind, "t": t, **fields},
                        "state": state,
                        "actions": [action(a) for a in actions],
                        "deadline": deadline,
                        "live_look": look,
                    }
                    for (t, kind, fields, state, actions, deadline), look in zip(steps, looks)
                ],
                "outcome": outcome,
                "hang": hang,
            }
        )
    doc = {
        "about": "Trace tables for the job state machine; see docs/CLIENT.md 'State machine'. "
        "Start from initial(config, t0); apply each step's event with step(); after "
        "it, the state name, the actions (in order), next_deadline() and live_look_due() "
        "(live_look) must match. "
        "After the last step, state.outcome and state.hang must match. Deadlines "
        "are compared with a tolerance of 1e-9.",
        "cases": cases,
    }
    path = os.path.join(ROOT, "vectors", "machine.json")
    with open(path, "w", encoding="ascii") as f:
        json.dump(doc, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
