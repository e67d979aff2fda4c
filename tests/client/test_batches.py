"""bridge/batches.py: the writer threads' batching rule (the feed to the events file and to a
client's stdout, a store row). A lone item is taken at once; items that come while the
writer waits out its period are taken together; urgent items and a close end the wait."""

import queue
import threading

from trainbridge.bridge.batches import Batches

WAIT_S = 20.0  # a deadline for the writer thread; every wait below is far shorter than it
LONG = 3600.0  # a period no test waits out: taking within WAIT_S proves there was no wait


def writer(batches):
    """A writer thread that hands each take() to the test through a queue."""
    taken = queue.Queue()

    def run():
        while True:
            items, closed = batches.take()
            taken.put((items, closed))
            if closed:
                return

    threading.Thread(target=run, daemon=True).start()
    return taken


def test_an_item_for_an_idle_writer_is_taken_at_once():
    batches = Batches(LONG)
    taken = writer(batches)
    batches.put("first line")
    assert taken.get(timeout=WAIT_S) == (["first line"], False)
    batches.close()
    assert taken.get(timeout=WAIT_S) == ([], True)


def test_items_that_come_within_the_period_are_one_batch():
    batches = Batches(0.2)
    batches.put(1)
    assert batches.take() == ([1], False)  # idle: at once
    for n in (2, 3, 4):  # a flood right after a write: they wait the period out together
        batches.put(n)
    assert len(batches) == 3
    assert batches.take() == ([2, 3, 4], False)


def test_an_urgent_item_ends_the_wait_and_takes_what_waited():
    batches = Batches(LONG)
    batches.put("a")
    assert batches.take() == (["a"], False)  # the period begins
    taken = writer(batches)
    batches.put("output")  # waits the period out
    batches.put("end", urgent=True)
    assert taken.get(timeout=WAIT_S) == (["output", "end"], False)
    batches.close()


def test_close_takes_what_waits_and_refuses_more():
    batches = Batches(LONG)
    batches.put("a")
    assert batches.take() == (["a"], False)
    batches.put("b")  # would wait the period out
    taken = writer(batches)
    batches.close()
    assert taken.get(timeout=WAIT_S) == (["b"], True)
    assert batches.put("late") is False
    assert batches.take() == ([], True)


def test_a_retry_returns_after_its_pause_even_with_nothing_new():
    """A writer whose write failed tries again what it kept: take(retry_after) comes back
    once the pause is over, with nothing if nothing came (it must not wait for an item)."""
    batches = Batches(LONG)
    got = queue.Queue()
    threading.Thread(target=lambda: got.put(batches.take(retry_after=0.05)), daemon=True).start()
    assert got.get(timeout=WAIT_S) == ([], False)


def test_a_retry_pauses_even_for_urgent_items_unless_closed():
    """A writer whose write failed pauses before it tries again, whatever comes."""
    batches = Batches(0.0)
    got = queue.Queue()
    threading.Thread(target=lambda: got.put(batches.take(retry_after=LONG)), daemon=True).start()
    batches.put("state", urgent=True)
    batches.close()
    # Taken by the close, not by the urgent item (that would say closed False).
    assert got.get(timeout=WAIT_S) == (["state"], True)
