"""bridge/job_asks.py on its own: which reply answers which ask (a caller's, the hang's
dump_stacks, the in-band cancel), with seqs as channel.command hands them out. The whole path
is the client tests' (test_dump_stacks, test_cancel, test_rank_dumps)."""

import threading

from trainbridge.bridge.job_asks import Asks


def held_box():
    box = [threading.Lock(), None]
    box[0].acquire()
    return box


def test_a_waiting_caller_gets_its_reply_and_is_woken_once():
    asks, box = Asks(), held_box()
    asks.caller(7, box)
    assert not asks.reply(b"w1", {"to": 7, "stacks": "main"})
    assert box[1] == {"to": 7, "stacks": "main"}
    assert box[0].acquire(blocking=False)  # released: the caller wakes
    asks.reply(b"w1", {"to": 7, "stacks": "again"})  # a second reply finds nobody waiting
    assert box[1] == {"to": 7, "stacks": "main"}


def test_the_hangs_dump_is_answered_once_at_its_last_seq_and_notes_who_answered():
    asks = Asks()
    asks.hang_dump(11, 13)  # three processes asked
    assert asks.hang_seqs == range(11, 14)
    assert not asks.reply(b"r0", {"to": 11, "stacks": "rank 0"})
    assert not asks.reply(b"r1", {"to": 12, "stacks": ""})  # no stacks: not an answer
    assert asks.reply(b"r2", {"to": 13, "stacks": "rank 2"})  # the machine's "dumped"
    assert not asks.reply(b"r2", {"to": 13, "stacks": "rank 2"})  # said once
    assert asks.hang_answered == {b"r0", b"r2"}
    assert not asks.reply(b"r3", {"to": 14, "stacks": "later"})  # another ask's
    assert asks.hang_answered == {b"r0", b"r2"}


def test_a_hang_dump_with_nobody_to_ask_awaits_nothing():
    asks = Asks()
    asks.hang_dump(11, None)
    assert asks.hang_seqs == range(0) and asks.hang_last is None
    assert not asks.reply(b"r0", {"to": None, "stacks": "x"})


def test_the_cancel_is_answered_by_one_of_its_seqs_then_no_longer_awaited():
    asks = Asks()
    asks.cancel(20, 21)
    assert not asks.cancel_answered({"to": 19, "ok": True})
    assert asks.cancel_answered({"to": 21, "ok": True})
    assert not asks.cancel_answered({"to": 20, "ok": True})  # answered already
    asks.cancel(22, None)  # nobody to ask
    assert asks.cancel_seqs == range(0)
