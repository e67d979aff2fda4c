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


def _steps_with(
    script_progress_after_first: bool = False, bar_after_first: bool = False, steps=(1, 2)
):
    """Optimizer steps through zero-code's step hook, in this process, with the script's own
    worker.progress() call, or a tqdm bar's progress, after the first or not: the points
    queued."""
    from trainbridge.worker import runtime

    saved = (
        auto._steps,
        auto._last_auto_progress,
        runtime.SLOT[0],
        auto._LOSS[:],
        auto._FIRST_POINT[0],
        list(runtime.SERIES),
        dict(auto._open),
        auto._OPTIMIZER_LAST[:],
    )
    try:
        auto._steps, auto._last_auto_progress, runtime.SLOT[0] = 0, None, None
        auto._FIRST_POINT[0] = None
        auto._OPTIMIZER_LAST[:] = [None, True]
        runtime.SERIES.clear()
        auto._open["train"] = True  # no stage changes from the hook here
        w = torch.nn.Parameter(torch.tensor([1.0]))
        for step in steps:
            loss = (w * float(step)).sum()
            loss.backward()
            auto._remember_loss(loss)
            auto._after_step(None, (), {})
            if script_progress_after_first:
                runtime.SLOT[0] = (step, None, {"acc": 0.5})  # as worker.progress() stores
            if bar_after_first and step == 1:  # a tqdm bar drew once, as zero-code sees it
                auto._last_auto_progress = runtime.SLOT[0] = (1, 100, {"bar": "epoch 0"})
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
            auto._OPTIMIZER_LAST[:],
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


def test_a_tqdm_bars_steps_are_the_curve_and_the_optimizers_are_no_points():
    """A bar restarts each epoch; the optimizer counts on: mixed, the curve had two x scales
    (steps 1, 2, 3, 3, 4, 5, ...). Once a bar set the progress, the optimizer adds none."""
    assert _steps_with(bar_after_first=True, steps=(1, 2, 3, 4)) == []


def test_a_cuda_loss_not_computed_when_sent_is_counted_not_lost_silently():
    from trainbridge.worker import runtime

    class Pending:
        def query(self):
            return False

    before = runtime.SERIES_FULL[0]
    try:
        assert auto._StepLoss(torch.tensor(1.0), Pending()).items() == ()
        assert runtime.SERIES_FULL[0] == before + 1  # sent as dropped.points
    finally:
        runtime.SERIES_FULL[0] = before
