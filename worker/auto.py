"""Zero-code mode: stages and progress for a script that never imports `worker`.

Loaded at interpreter start by bridge/inject/sitecustomize.py when a trainbridge client
launched the process. It only observes: the user's code is never patched, and the library
hooks below are chosen so that their cost is paid at most a few times a second.

- "startup" from interpreter start until the first frame of __main__ runs (a one-shot
  profile hook, removed as soon as it fires); then "main" until the process ends.
- "import <module>" while a heavy module (torch, transformers, ...) is first imported, so
  a hang inside that import names it (a meta-path finder that wraps the real loader).
- once torch is imported: "first batch" from the first DataLoader iterator until its
  first batch arrives, then "train"; progress counted from optimizer steps through
  torch's global optimizer step hook, with the loss the script passes to backward() (a
  0-dim tensor kept by reference, read only when the beacon sends) and the total a
  OneCycleLR schedule was given, or a CosineAnnealingLR's T_max / PolynomialLR's
  total_iters once the schedule's pace (per batch or per epoch) is seen. A script that
  names its own stages or reports its own progress through the worker API keeps them:
  these automatic ones stand aside.
- at exit, the stages opened here are closed (status "error" after an uncaught exception,
  "cancelled" after the job's cancel),
  so the report's stage is where the process really was when it died without exiting.
- once tqdm is imported: every bar's refresh (tqdm rate-limits those to ~10 Hz) becomes
  progress with the bar's description, count, total and rate, and the numbers the script
  gave its set_postfix() (loss=..., lr=...), so a download stuck at 0 B/s becomes a stall
  that names the file and a loss shown only on the bar reaches the report. Before training
  (no "first batch" or "train" yet), the outermost main-thread bar with a description is a
  stage of that name while it lives ("Downloading model.safetensors", "Tokenizing"): the
  phases a tqdm-only script shows its user are the ones it is judged by.

Its length (about 500 lines): sitecustomize loads it into every supervised interpreter
before the script runs, so it stays one module: each more would be one more import, at
every start, in every process of the job. Its hooks share one rule (stand aside when the
script uses the worker API) and one state.
"""

from __future__ import annotations

import atexit
import importlib.machinery
import os
import sys
import threading

from trainbridge import worker
from trainbridge.worker.runtime import SERIES_FULL, SLOT, STATE, add_point, nudge

# importlib.abc (it loads importlib.resources, tempfile, random...) and typing would cost
# every supervised process milliseconds at start-up: the finders and loaders below are
# plain classes with the methods the import system calls.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import FrameType, ModuleType
    from typing import Any, Callable, Literal, Optional

    _ProfileEvent = Literal["call", "return", "c_call", "c_return", "c_exception"]

HEAVY_MODULES = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "transformers",
        "diffusers",
        "datasets",
        "accelerate",
        "peft",
        "safetensors",
        "huggingface_hub",
        "tensorflow",
        "jax",
        "xformers",
        "bitsandbytes",
        "deepspeed",
        "lightning",
        "pytorch_lightning",
        "timm",
        "open_clip",
        "numpy",
        "pandas",
        "scipy",
        "sklearn",
        "cv2",
        "PIL",
    }
)

_installed = False
_open: dict[str, Any] = {}  # stage name -> its context manager, for the long-lived stages
_lock = threading.Lock()


def install() -> None:
    """Start the worker and the automatic stages. Idempotent; never raises into startup."""
    global _installed
    if _installed or not worker.enabled():
        return
    _installed = True
    _begin("startup")
    atexit.register(_close_all)  # runs before the worker's bye (atexit is LIFO)
    sys.meta_path.insert(0, _HeavyImportFinder())
    _watch_for_main()
    _on_import("tqdm.std", _hook_tqdm)
    _on_import("torch.utils.data", _hook_torch_data)
    _on_import("torch.optim.optimizer", _hook_torch_optim)
    _on_import("torch.optim.lr_scheduler", _hook_lr_scheduler)
    # torch.save to a path is a checkpoint (artifacts). Hooked where it is defined, before
    # torch/__init__ takes its name from there ("torch" itself is the heavy-import stage's).
    _on_import("torch.serialization", _hook_torch_save)
    _on_import("PIL.Image", _hook_image_save)  # Image.save to a path: a sample image
    # What LoRA trainers and Hugging Face scripts save with: a checkpoint each.
    _on_import("safetensors.torch", _hook_save_file)
    _on_import("transformers.modeling_utils", _hook_save_pretrained("PreTrainedModel"))
    _on_import("diffusers.models.modeling_utils", _hook_save_pretrained("ModelMixin"))


# --- long-lived stages ------------------------------------------------------------------
def _begin(name: str) -> None:
    with _lock:
        if name in _open:
            return
        cm = worker.stage(name)
        cm.__enter__()
        _open[name] = cm


def _end(name: str, failed: bool = False) -> None:
    with _lock:
        cm = _open.pop(name, None)
    if cm is not None:
        error = None
        if failed:  # a cancel's KeyboardInterrupt is kept: the stage ends "cancelled"
            last = getattr(sys, "last_value", None)
            error = (
                last if isinstance(last, KeyboardInterrupt) else RuntimeError("uncaught exception")
            )
        cm.__exit__(type(error) if error else None, error, None)


def _close_all() -> None:
    failed = getattr(sys, "last_value", None) is not None  # set when an exception went uncaught
    for name in reversed(list(_open)):
        _safe(_end, name, failed)


_last_auto_progress: Any = None


def _auto_progress(step: Any, total: Any, **metrics: Any) -> None:
    global _last_auto_progress
    worker.progress(step, total, **metrics)
    _last_auto_progress = SLOT[0]


def _user_progress() -> bool:
    """True once the script reports progress itself through worker.progress: that wins."""
    latest = SLOT[0]
    return latest is not None and latest is not _last_auto_progress


def _user_stages_open() -> bool:
    """True when the script itself has a stage open (it names its own phases)."""
    auto = set(_open)
    return any(not (name in auto or name.startswith("import ")) for name in list(STATE.stages))


# --- startup -> main ----------------------------------------------------------------------
def _watch_for_main() -> None:
    """End "startup" at the first call into a frame of __main__ (python x.py, python -m x,
    and the rank scripts that torchrun starts all run their code as __main__)."""
    previous = sys.getprofile()

    def profile(frame: FrameType, event: _ProfileEvent, arg: Any) -> None:
        if previous is not None:
            previous(frame, event, arg)
        if frame.f_globals.get("__name__") == "__main__":
            sys.setprofile(previous)
            _end("startup")
            _begin("main")

    sys.setprofile(profile)


# --- heavy imports ------------------------------------------------------------------------
class _WrappedLoader:
    """A module's real loader with something done around its exec_module (subclasses): every
    other call goes to the real one."""

    def __init__(self, real: Any, name: str):
        self._real = real
        self._name = name

    def create_module(self, spec: ModuleSpec) -> Any:
        return self._real.create_module(spec)

    def __getattr__(self, attr: str) -> Any:  # get_resource_reader, is_package, get_code, ...
        return getattr(self._real, attr)


class _StageLoader(_WrappedLoader):
    """Runs the real loader inside an "import <name>" stage."""

    def exec_module(self, module: ModuleType) -> None:
        with worker.stage(f"import {self._name}"):
            self._real.exec_module(module)


class _HeavyImportFinder:
    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]] = None,
        target: Optional[ModuleType] = None,
    ) -> Any:  # a ModuleSpec whose loader may be ours: a plain class, not an importlib.abc.Loader
        if fullname not in HEAVY_MODULES or getattr(self._busy, "on", False):
            return None
        self._busy.on = True  # the other finders below may import; don't recurse into us
        try:
            spec: Any = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is None:
                spec = _find_elsewhere(fullname, path, target, lambda finder: finder is self)
        finally:
            self._busy.on = False
        return _wrapped(spec, _StageLoader, fullname)


def _find_elsewhere(
    fullname: str,
    path: Optional[Sequence[str]],
    target: Optional[ModuleType],
    ours: Callable[[Any], bool],
) -> Any:
    """The spec the first of the meta path's other finders gives (those `ours` does not
    name), or None."""
    for finder in sys.meta_path:
        if ours(finder) or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _wrapped(spec: Any, loader: Callable[[Any, str], Any], fullname: str) -> Any:
    """The spec with its loader wrapped in ours (when it has one that executes modules)."""
    if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
        spec.loader = loader(spec.loader, fullname)
    return spec


# --- library hooks, installed when the library is imported --------------------------------
_pending: dict[str, Callable[[Any], None]] = {}


def _on_import(module_name: str, hook: Callable[[Any], None]) -> None:
    """Call hook(module) once module_name is imported (now, if it already is)."""
    module = sys.modules.get(module_name)
    if module is not None:
        _safe(hook, module)
        return
    if not _pending:
        sys.meta_path.insert(0, _PostImportFinder())
    _pending[module_name] = hook


class _PostImportLoader(_WrappedLoader):
    """Runs the real loader, then the hook waiting for the module."""

    def exec_module(self, module: ModuleType) -> None:
        self._real.exec_module(module)
        hook = _pending.pop(self._name, None)
        if hook is not None:
            _safe(hook, module)


class _PostImportFinder:
    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]] = None,
        target: Optional[ModuleType] = None,
    ) -> Any:  # a ModuleSpec whose loader may be ours: a plain class, not an importlib.abc.Loader
        if fullname not in _pending:
            return None
        spec = _find_elsewhere(
            fullname,
            path,
            target,
            lambda finder: finder is self or isinstance(finder, _HeavyImportFinder),
        )
        return _wrapped(spec, _PostImportLoader, fullname)


def _safe(fn: Callable[..., Any], *args: Any) -> Optional[Any]:
    """Our hooks must never break the script: failures are reported once and dropped."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the docstring's rule: never break the script
        _report_internal(exc)
        return None


_reported = False


def _report_internal(exc: BaseException) -> None:
    global _reported
    if _reported:
        return
    _reported = True
    try:
        worker.log(
            f"zero-code hook failed ({type(exc).__name__}: {exc}); supervision goes on "
            "without automatic stages",
            level="warning",
        )
    except Exception:  # noqa: BLE001 - the report of a failure failed: nothing left to tell
        pass


# The bar whose description is a stage now: [id(bar), stage name] (one at a time: the
# outermost; see the module docstring).
_bar_stage: list[Any] = [None, None]
_training = [False]  # "first batch" or "train" began: bars are progress only from then on
_AUTO_NAMES = ("startup", "main", "first batch", "train")
POSTFIX_ATTR = "_trainbridge_postfix"


def _bar_stage_begin(bar: Any) -> None:
    if (
        _bar_stage[0] is not None
        or _training[0]
        or threading.current_thread() is not threading.main_thread()
        or _user_stages_open()
        or _user_progress()
    ):
        return
    name = str(getattr(bar, "desc", "") or "").strip().rstrip(":").strip()[:80]
    if not name or name in _AUTO_NAMES or name.startswith("import ") or name in _open:
        return
    _bar_stage[:] = [id(bar), name]
    _begin(name)


def _bar_stage_end(bar: Any) -> None:
    if _bar_stage[0] is not None and _bar_stage[0] == id(bar):
        name = _bar_stage[1]
        _bar_stage[:] = [None, None]
        _end(name)


def _training_begins() -> None:
    """The torch hooks open "first batch" or "train": a bar's stage ends first, so theirs
    stay directly inside "main"."""
    _training[0] = True
    if _bar_stage[0] is not None:
        name = _bar_stage[1]
        _bar_stage[:] = [None, None]
        _end(name)


def _postfix_numbers(values: dict[Any, Any]) -> dict[str, Any]:
    """The numbers of a set_postfix() call, as metrics: plain numbers, numpy scalars and 0-dim
    tensors (tqdm has just formatted them, so reading one costs no GPU wait of its own)."""
    import numbers

    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, numbers.Number) and not isinstance(value, complex):
            out[str(key)] = float(value) if isinstance(value, numbers.Real) else value
        elif getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
            try:
                out[str(key)] = float(value.item())
            except Exception:  # noqa: BLE001 - not a number after all: tqdm shows it, we skip it
                pass
    return out


def _hook_tqdm(module: Any) -> None:
    cls = module.tqdm
    real_refresh, real_close = cls.refresh, cls.close
    real_set_postfix = cls.set_postfix

    def report(bar: Any) -> None:
        if _user_progress():
            return
        try:
            fmt = bar.format_dict
            metrics = dict(getattr(bar, POSTFIX_ATTR, None) or {})
            metrics.update(
                bar=str(fmt.get("prefix") or bar.desc or ""), unit=str(fmt.get("unit") or "it")
            )
            rate = fmt.get("rate")
            if rate is None and fmt.get("elapsed"):
                rate = fmt.get("n", 0) / fmt["elapsed"]
            if rate is not None:
                metrics["rate"] = float(rate)
            _auto_progress(fmt.get("n", bar.n), fmt.get("total"), **metrics)
        except Exception as exc:  # noqa: BLE001 - a bar's odd format_dict must not break tqdm
            _report_internal(exc)

    def refresh(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(self, "disable", True):
            _safe(_bar_stage_begin, self)
            report(self)
        return real_refresh(self, *args, **kwargs)

    def close(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(self, "disable", True):
            report(self)
            _safe(_bar_stage_end, self)
        return real_close(self, *args, **kwargs)

    def set_postfix(self: Any, ordered_dict: Any = None, refresh: Any = True, **kwargs: Any) -> Any:
        try:
            values = dict(ordered_dict or {})
            values.update(kwargs)
            setattr(self, POSTFIX_ATTR, _postfix_numbers(values))
        except Exception as exc:  # noqa: BLE001 - a metric must never break the bar
            _report_internal(exc)
        return real_set_postfix(self, ordered_dict, refresh, **kwargs)

    fn: Any = set_postfix  # a def's type has no __wrapped__ (mypy); Any's has
    fn.__wrapped__ = real_set_postfix
    cls.refresh, cls.close, cls.set_postfix = refresh, close, set_postfix


_first_batch_seen = False


def _hook_torch_data(module: Any) -> None:
    loader_cls = module.DataLoader
    real_iter = loader_cls.__iter__

    def __iter__(self: Any) -> Any:
        iterator = real_iter(self)
        if _first_batch_seen:
            return iterator
        return _FirstBatch(iterator)

    loader_cls.__iter__ = __iter__


class _FirstBatch:
    """Wraps only the first DataLoader iterator, until its first batch arrives."""

    def __init__(self, iterator: Any) -> None:
        self._it = iterator
        self._staged = not _user_stages_open()
        if self._staged:
            _training_begins()
            _begin("first batch")

    def __iter__(self) -> _FirstBatch:
        return self

    def __next__(self) -> Any:
        global _first_batch_seen
        batch = next(self._it)
        if not _first_batch_seen:
            _first_batch_seen = True
            if self._staged:
                _end("first batch")
                _begin("train")
        return batch

    def __len__(self) -> int:
        return len(self._it)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._it, attr)


_steps = 0


# The loss an unmodified script passes to backward(): a reference to the 0-dim tensor is
# kept per step, and its value read on the beacon's thread when progress is sent (a few
# times a second), for a CUDA tensor only once an event recorded after it has completed, so
# neither the step nor the beacon waits for the GPU. A CPU loss is kept as it is, not
# detached: detach() cost 0.6-1.8 us per step (load 7-15; 0.15-0.5% of the demo model's
# ~360 us step; keeping the tensor costs ~0.1 us). After backward() the kept tensor holds
# only its graph's nodes, not their saved tensors. Every optimizer step's loss is also a
# progress point (runtime.SERIES, as a worker.progress() call with metrics is): the tensor
# is queued as it is (a _StepLoss) and read when sent, so a curve or a NaN of one step is
# not lost between two sends; that costs the step ~0.3 us, where reading it there would
# cost ~1.1 us.
_LOSS: list[Any] = [None, None, None, False]  # [tensor, cuda event or None, last value, new]
_TOTAL: list[Any] = [None]  # a total the script declared to a library (OneCycleLR, T_max...)


class _OptimizerMetrics(dict[str, object]):
    """The zero-code progress metrics: source=optimizer, and the loss read lazily, on the
    beacon thread, when progress is sent (the beacon reads metrics through items())."""

    def items(self) -> Any:  # a list, not dict_items: what the beacon iterates
        loss = _loss_value()
        return [("source", "optimizer")] + ([("loss", loss)] if loss is not None else [])


def _loss_value() -> Any:
    tensor, event, last = _LOSS[0], _LOSS[1], _LOSS[2]
    if tensor is None:
        return last
    try:
        if event is not None and not event.query():
            return last  # not computed yet: the last value read, never a wait for the GPU
        value = float(tensor.item())
    except Exception:  # noqa: BLE001 - a metric must never cost the job
        return last
    _LOSS[2] = value
    return value


def _remember_loss(tensor: Any) -> None:
    _LOSS[3] = True  # the optimizer's next step makes it a point
    if not tensor.is_cuda:
        _LOSS[0], _LOSS[1] = tensor, None  # read with .item() later, on the beacon
        return
    import torch

    cuda: Any = torch.cuda  # torch.cuda.Event() has no annotations (mypy --strict)
    event = cuda.Event()
    event.record()
    _LOSS[0], _LOSS[1] = tensor.detach(), event


_FIRST_POINT: list[Any] = [None]  # the first step's point until the second shows no one else counts
# The progress value the optimizer's hook last set, and whether its steps are the curve's x:
# until another source (a tqdm bar, the script's own worker.progress()) sets the progress
# between two of its steps; from then on that source's steps are (a bar restarts each epoch).
_OPTIMIZER_LAST: list[Any] = [None, True]  # [its last value, still the source]


class _StepLoss:
    """One optimizer step's loss as a progress point (runtime.SERIES holds it until the
    beacon sends progress; its items() are read there): the value, or none while a CUDA
    loss is not computed yet (never a wait for the GPU)."""

    __slots__ = ("tensor", "event")

    def __init__(self, tensor: Any, event: Any) -> None:
        self.tensor, self.event = tensor, event

    def items(self) -> tuple[tuple[str, float], ...]:
        try:
            if self.event is not None and not self.event.query():
                SERIES_FULL[0] += 1  # not computed when sent: counted (`dropped.points`)
                return ()
            return (("loss", float(self.tensor.item())),)
        except Exception:  # noqa: BLE001 - a metric must never cost the job
            return ()


def _hook_backward(tensor_cls: Any) -> None:
    real_backward = tensor_cls.backward

    STATE.work = STATE.work or 0

    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        STATE.work += 1  # type: ignore[operator]  # set above, before the hook exists
        if self.ndim == 0 and (SLOT[0] is None or SLOT[0] is _last_auto_progress):
            try:
                _remember_loss(self)
            except Exception:  # noqa: BLE001 - the loss is optional; backward() must run
                pass
        return real_backward(self, *args, **kwargs)

    backward.__doc__ = real_backward.__doc__
    fn: Any = backward  # a def's type has no __wrapped__ (mypy); Any's has
    fn.__wrapped__ = real_backward
    tensor_cls.backward = backward


# A schedule with a known horizon counted in its own step() calls (CosineAnnealingLR's T_max,
# PolynomialLR's total_iters): [scheduler, its last_epoch when made, horizon, optimizer
# steps taken before it was made], or
# [_AMBIGUOUS] when two horizons or a composite schedule (SequentialLR, ChainedScheduler)
# make the run's length unknowable from them.
_HORIZON: list[Any] = [None, 0, 0, 0]
_AMBIGUOUS = object()
_HORIZON_ATTRS = {"CosineAnnealingLR": "T_max", "PolynomialLR": "total_iters"}


def _horizon_total(steps: int) -> None:
    """At optimizer step `steps`, once the horizon schedule has first advanced: how many
    optimizer steps one of its steps is (1 when stepped per batch, the batches of an epoch
    when stepped per epoch) times the horizon left is the total. Runs only until decided."""
    sched, base, horizon, before = _HORIZON
    advanced = getattr(sched, "last_epoch", base) - base
    if advanced < 1:
        return
    per = max(1, round((steps - 1 - before) / advanced))
    _TOTAL[0] = before + max(1, horizon - base) * per
    _HORIZON[0] = None


def _hook_lr_scheduler(module: Any) -> None:
    """OneCycleLR is told the length of the run in steps (total_steps, or epochs times
    steps_per_epoch): that is the progress total. CosineAnnealingLR's T_max and
    PolynomialLR's total_iters count the schedule's own steps: once it first advances,
    its pace against the optimizer's (per batch or per epoch) turns it into optimizer
    steps (_horizon_total). Composite schedules leave the total unknown."""

    def wrap(cls: Any, after: Callable[[Any], None]) -> None:
        real_init = cls.__init__

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            real_init(self, *args, **kwargs)
            try:
                after(self)
            except Exception:  # noqa: BLE001 - a total must never cost the job
                pass

        fn: Any = __init__  # a def's type has no __wrapped__ (mypy); Any's has
        fn.__wrapped__ = real_init
        cls.__init__ = __init__

    def one_cycle(sched: Any) -> None:
        total = getattr(sched, "total_steps", None)
        if isinstance(total, int) and total > 0:
            _TOTAL[0] = total

    def horizon(attr: str) -> Callable[[Any], None]:
        def seen(sched: Any) -> None:
            value = getattr(sched, attr, None)
            if not isinstance(value, int) or value <= 0 or _HORIZON[0] is _AMBIGUOUS:
                return
            if _HORIZON[0] is not None or _TOTAL[0] is not None:
                _HORIZON[0] = _AMBIGUOUS  # a second schedule: which one is the run's?
                return
            _HORIZON[:] = [sched, getattr(sched, "last_epoch", 0), value, _steps]

        return seen

    def composite(_sched: Any) -> None:
        _HORIZON[0] = _AMBIGUOUS

    if getattr(module, "OneCycleLR", None) is not None:
        wrap(module.OneCycleLR, one_cycle)
    for name, attr in _HORIZON_ATTRS.items():
        if getattr(module, name, None) is not None:
            wrap(getattr(module, name), horizon(attr))
    for name in ("SequentialLR", "ChainedScheduler"):
        if getattr(module, name, None) is not None:
            wrap(getattr(module, name), composite)


def _artifact(path: Any, kind: str, by: str) -> None:
    try:
        from trainbridge.worker import artifacts

        artifacts.record(path, kind, by=by)
    except Exception:  # noqa: BLE001 - telling about a file must never cost the save
        pass


def _telling(real: Any, keyword: str, kind: str, by: str) -> Callable[..., Any]:
    """`real`, a save function whose second argument (or `keyword`) is where it saves, made
    to tell the client about the file when that is a path (a file object names none)."""

    def save(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        where = args[1] if len(args) > 1 else kwargs.get(keyword)
        if isinstance(where, (str, os.PathLike)):
            _artifact(where, kind, by)
        return result

    save.__doc__ = real.__doc__
    save.__wrapped__ = real  # type: ignore[attr-defined]
    return save


def _hook_torch_save(serialization: Any) -> None:
    """torch.save(obj, "ckpt.pt") is a checkpoint the job made (worker/artifacts.py)."""
    real = getattr(serialization, "save", None)
    if real is None or getattr(real, "__wrapped__", None) is not None:
        return
    serialization.save = save = _telling(real, "f", "checkpoint", "torch.save")
    torch: Any = sys.modules.get("torch")
    if torch is not None and getattr(torch, "save", None) is real:
        torch.save = save  # torch was imported before the worker was


def _hook_save_file(module: Any) -> None:
    """safetensors' save_file(tensors, "lora.safetensors"): a checkpoint (LoRA trainers')."""
    real = getattr(module, "save_file", None)
    if real is not None and getattr(real, "__wrapped__", None) is None:
        module.save_file = _telling(real, "filename", "checkpoint", "safetensors.save_file")


def _hook_save_pretrained(class_name: str) -> Callable[[Any], None]:
    """model.save_pretrained("out/") of transformers' or diffusers' models: a checkpoint (a
    directory)."""

    def hook(module: Any) -> None:
        cls: Any = getattr(module, class_name, None)
        real = getattr(cls, "save_pretrained", None)
        if real is not None and getattr(real, "__wrapped__", None) is None:
            cls.save_pretrained = _telling(real, "save_directory", "checkpoint", "save_pretrained")

    return hook


def _hook_image_save(module: Any) -> None:
    """PIL's Image.save("sample.png") is an image the job made (worker/artifacts.py)."""
    cls: Any = getattr(module, "Image", None)
    real = getattr(cls, "save", None)
    if real is None or getattr(real, "__wrapped__", None) is not None:
        return
    cls.save = _telling(real, "fp", "image", "Image.save")


_OPTIMIZER_METRICS = _OptimizerMetrics(source="optimizer")  # shared: no dict per step


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    # Runs on every optimizer step, so it is kept to a few stores: measured, the former
    # version (a worker.progress call with keyword arguments) cost a training loop ~1.5%.
    global _steps, _last_auto_progress
    latest = SLOT[0]
    if latest is not None and latest is not _last_auto_progress:
        _FIRST_POINT[0] = None
        return  # the script reports its own progress: that wins
    _steps += 1
    if _HORIZON[0] is not None and _HORIZON[0] is not _AMBIGUOUS and _TOTAL[0] is None:
        _horizon_total(_steps)
    if _steps == 1 and "train" not in _open and not _user_stages_open():
        _training_begins()
        _end("first batch")
        _begin("train")
    if latest is not None and latest is not _OPTIMIZER_LAST[0]:
        _OPTIMIZER_LAST[1] = False  # a bar counts too: its steps are the curve's, for good
    _last_auto_progress = SLOT[0] = _OPTIMIZER_LAST[0] = (_steps, _TOTAL[0], _OPTIMIZER_METRICS)
    if not _OPTIMIZER_LAST[1]:
        _FIRST_POINT[0] = None
        _LOSS[3] = False
    elif _LOSS[3]:  # this step's loss, a point of the curve (read when sent)
        _LOSS[3] = False
        point = (_steps, _TOTAL[0], _StepLoss(_LOSS[0], _LOSS[1]))
        if _steps == 1:  # a script that reports its own progress has not said so yet
            _FIRST_POINT[0] = point
        else:
            if _FIRST_POINT[0] is not None:  # it did not: the first step is ours too
                add_point(_FIRST_POINT[0])
                _FIRST_POINT[0] = None
            add_point(point)
    if STATE.idle_progress:
        nudge()  # the beacon sleeps until its next heartbeat: send this now


def _hook_torch_optim(module: Any) -> None:
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "Tensor"):
        _hook_backward(torch.Tensor)

    module.register_optimizer_step_post_hook(_after_step)
