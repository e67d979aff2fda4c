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


def _steps_with(script_progress_after_first: bool):
    """Two optimizer steps through zero-code's step hook, in this process, with the
    script's own worker.progress() call after the first or not: the points queued."""
    from trainbridge.worker import runtime

    saved = (
        auto._steps,
        auto._last_auto_progress,
        runtime.SLOT[0],
        auto._LOSS[:],
        auto._FIRST_POINT[0],
        list(runtime.SERIES),
        dict(auto._open),
    )
    try:
        auto._steps, auto._last_auto_progress, runtime.SLOT[0] = 0, None, None
        auto._FIRST_POINT[0] = None
        runtime.SERIES.clear()
        auto._open["train"] = True  # no stage changes from the hook here
        w = torch.nn.Parameter(torch.tensor([1.0]))
        for step in (1, 2):
            loss = (w * float(step)).sum()
            loss.backward()
            auto._remember_loss(loss)
            auto._after_step(None, (), {})
            if script_progress_after_first:
                runtime.SLOT[0] = (step, None, {"acc": 0.5})  # as worker.progress() stores
        return [(step, dict(metrics.items())) for step, _, metrics in runtime.SERIES]
    finally:
        (
            auto._steps,
            auto._last_auto_progress,
            runtime.SLOT[0],
            auto._LOSS[:],
            auto._FIRST_POINT[0],
            series,
            opened,
        ) = saved
        runtime.SERIES[:] = series
        auto._open.clear()
        auto._open.update(opened)


def test_every_step_of_an_unmodified_script_is_a_point_with_its_loss():
    assert _steps_with(script_progress_after_first=False) == [
        (1, {"loss": 1.0}),
        (2, {"loss": 2.0}),
    ]


def test_a_script_that_reports_its_own_progress_gets_no_point_from_zero_code():
    """Its first optimizer step comes before its first worker.progress() call: that step's
    loss was queued as a point, a second step 1 beside the script's own."""
    assert _steps_with(script_progress_after_first=True) == []
