"""Turn exceptions and stacks into the values the protocol carries (pure: values in,
values out; `traceback` is imported on first use, not at `import worker`)."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs milliseconds at `import worker`
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any, Optional

# Attribute set on an exception by the innermost stage it escaped from, so that an error
# reported later (sys.excepthook runs after every stage has closed) still names its stage.
STAGE_ATTR = "__trainbridge_stage__"


def safe_str(obj: Any) -> str:
    try:
        return str(obj)
    except BaseException:  # noqa: BLE001 - a broken __str__ must not hide the error
        return f"<unprintable {type(obj).__name__}>"


def qualified_name(cls: type) -> str:
    module = getattr(cls, "__module__", None)
    name = str(getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "?"))
    return name if module in (None, "builtins") else f"{module}.{name}"


def is_cuda_oom(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (alias torch.cuda.OutOfMemoryError) by type name, so torch
    is never imported here; older torch raised a RuntimeError with this message."""
    for cls in type(exc).__mro__:
        if cls.__name__ == "OutOfMemoryError" and str(cls.__module__).startswith("torch"):
            return True
    return isinstance(exc, RuntimeError) and "CUDA out of memory" in safe_str(exc)


def chain_of(exc: BaseException) -> list[dict[str, str]]:
    """The __cause__ / __context__ chain, nearest first, as Python prints it."""
    out: list[dict[str, str]] = []
    seen = {id(exc)}
    current = exc
    while True:
        if current.__cause__ is not None:
            nxt, relation = current.__cause__, "cause"
        elif current.__context__ is not None and not current.__suppress_context__:
            nxt, relation = current.__context__, "context"
        else:
            return out
        if id(nxt) in seen:
            return out
        seen.add(id(nxt))
        out.append(
            {"type": qualified_name(type(nxt)), "message": safe_str(nxt), "relation": relation}
        )
        current = nxt


def _chain_exceptions(exc: BaseException) -> list[BaseException]:
    found, seen, current = [exc], {id(exc)}, exc
    while True:
        nxt = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
        if nxt is None or id(nxt) in seen:
            return found
        seen.add(id(nxt))
        found.append(nxt)
        current = nxt


def kind_of(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "keyboard_interrupt"
    if isinstance(exc, SystemExit):
        return "system_exit"
    if any(is_cuda_oom(e) for e in _chain_exceptions(exc)):
        return "cuda_oom"
    return "exception"


def frames_of(summary: Any) -> list[dict[str, Any]]:
    return [{"file": f.filename, "line": f.lineno or 0, "function": f.name} for f in summary]


def error_body(
    exc: BaseException,
    *,
    fatal: bool,
    thread: str,
    stage: Optional[str],
    kind: Optional[str] = None,
) -> dict[str, Any]:
    import traceback

    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException:  # noqa: BLE001 - e.g. a __str__ that raises inside the chain
        text = f"{qualified_name(type(exc))}: {safe_str(exc)}\n"
    return {
        "type": qualified_name(type(exc)),
        "message": safe_str(exc),
        "traceback": text,
        "frames": frames_of(traceback.extract_tb(exc.__traceback__)),
        "chain": chain_of(exc),
        "stage": getattr(exc, STAGE_ATTR, None) or stage,
        "fatal": fatal,
        "thread": thread,
        "kind": kind or kind_of(exc),
    }


def message_body(
    message: str,
    *,
    fatal: bool,
    thread: str,
    stage: Optional[str],
    kind: str = "exception",
    skip: int = 0,
) -> dict[str, Any]:
    """An error that is not an exception: the caller's stack stands in for a traceback."""
    import traceback

    summary = traceback.extract_stack(sys._getframe(1 + skip))
    text = "".join(traceback.format_list(summary)) + f"Error: {message}\n"
    return {
        "type": "Error",
        "message": message,
        "traceback": text,
        "frames": frames_of(summary),
        "chain": [],
        "stage": stage,
        "fatal": fatal,
        "thread": thread,
        "kind": kind,
    }


def format_stack(frame: Optional[FrameType]) -> str:
    import traceback

    return "".join(traceback.format_stack(frame)) if frame is not None else ""


def all_stacks() -> str:
    """Every thread's Python stack, most recent call last, like faulthandler but richer: the
    main thread first (where a script usually is), then the script's other threads, then
    trainbridge's own ("trainbridge-..."), so a reader is not first shown the beacon's."""
    import threading

    names = {t.ident: t.name for t in threading.enumerate()}
    main = threading.main_thread().ident

    def order(item: Any) -> int:
        ident = item[0]
        return 0 if ident == main else 2 if names.get(ident, "").startswith("trainbridge-") else 1

    parts = []
    for ident, frame in sorted(sys._current_frames().items(), key=order):
        parts.append(
            f'Thread {ident:#x} "{names.get(ident, "?")}" (most recent call last):\n'
            + format_stack(frame)
        )
    return "\n".join(parts)


FH_MAX_THREADS = 100  # faulthandler's limits, so its readers see what they expect
FH_MAX_DEPTH = 100


def faulthandler_stacks(current: Optional[int], interrupted: Any = None) -> str:
    """Every thread's stack in faulthandler's own format ("Thread 0x... (most recent call
    first):", '  File "x.py", line 3 in f'), the thread `current` last and headed "Current
    thread", so that whatever reads faulthandler's dumps reads this one too. Call it with
    the GIL held (from Python): the frames cannot change while they are read. From a signal
    handler, `interrupted` (its frame argument) is where the current thread's stack starts:
    the handler's own frames are not where the script is."""
    frames = sys._current_frames()
    if current is not None and interrupted is not None:
        frames[current] = interrupted
    order = [ident for ident in frames if ident != current][: FH_MAX_THREADS - 1]
    if current in frames:
        order.append(current)
    parts = []
    for ident in order:
        head = "Current thread" if ident == current else "Thread"
        lines = [f"{head} {ident:#018x} (most recent call first):"]
        frame: Any = frames[ident]
        depth = 0
        while frame is not None:
            if depth >= FH_MAX_DEPTH:
                lines.append("  ...")
                break
            code = frame.f_code
            line = frame.f_lineno
            lines.append(
                f'  File "{code.co_filename}", line '
                f'{"???" if line is None else line} in {code.co_name}'
            )
            frame = frame.f_back
            depth += 1
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)
