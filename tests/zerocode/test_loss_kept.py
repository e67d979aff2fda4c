"""The loss kept from backward() in zero-code mode (worker/auto.py): a CPU loss is kept as
the script's own tensor, not a per-step detached copy (detach() was 0.6-1.8 us of
every step), and its value is still read as a float when the beacon sends progress."""

import gc
import weakref

torch = __import__("pytest").importorskip("torch")

from trainbridge.worker import auto  # noqa: E402 - after the skip: needs torch


def test_a_cpu_loss_is_kept_as_is_and_read_after_backward():
    saved = auto._LOSS[:]
    try:
        w = torch.nn.Parameter(torch.tensor([3.0]))
        loss = (w * 2.0).pow(2).sum()  # 36
        loss.backward()
        auto._remember_loss(loss)
        assert auto._LOSS[0] is loss and auto._LOSS[1] is None  # no copy, no event
        assert auto._loss_value() == 36.0
        assert w.grad is not None and float(w.grad) == 24.0  # backward ran as usual
    finally:
        auto._LOSS[:] = saved


def test_the_kept_loss_is_replaced_by_the_next_step_and_released():
    saved = auto._LOSS[:]
    try:
        w = torch.nn.Parameter(torch.tensor([1.0]))
        first = (w * 3.0).sum()
        first.backward()
        auto._remember_loss(first)
        gone = weakref.ref(first)
        del first
        second = (w * 5.0).sum()
        second.backward()
        auto._remember_loss(second)
        gc.collect()
        assert gone() is None  # one step's loss at most is held
        assert auto._loss_value() == 5.0
    finally:
        auto._LOSS[:] = saved
