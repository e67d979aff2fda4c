"""What a job made: checkpoints, sample images, any file the script names (worker.artifact,
and zero-code mode's hooks: torch.save, PIL's Image.save, safetensors' save_file,
save_pretrained; worker/auto.py). Each becomes an `artifact`
message (PROTOCOL.md): the file's absolute path, its name, its kind, its size when written,
the step it was made at; the supervisor lists them in the report and the dashboard shows
checkpoints to download and images as a gallery.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from trainbridge.worker.runtime import SLOT, STATE, enqueue_event

KINDS = ("checkpoint", "image", "file")
# At most this many per process: a script that writes a dataset's 50,000 images through PIL
# is preparing data, not making samples; past it each is counted (`dropped.artifacts`).
ARTIFACTS_MAX = 1000
_said = [0]
_CHECKPOINT = (".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".pkl", ".npz", ".h5", ".gguf")
_IMAGE = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")


def kind_of(path: str) -> str:
    """A file's kind by its name: checkpoint, image or file."""
    ext = os.path.splitext(path)[1].lower()
    if ext in _IMAGE:
        return "image"
    if ext in _CHECKPOINT or os.path.isdir(path):
        return "checkpoint"  # a directory: save_pretrained's
    return "file"


def record(path: Any, kind: Optional[str] = None, step: Any = None, by: str = "script") -> bool:
    """Tell the client about a file the job made; False when not supervised or `path` is not
    a path. ValueError for an unknown kind."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"worker.artifact: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if not STATE.enabled:
        return False
    try:
        path = os.path.abspath(os.fspath(path))
    except TypeError:
        return False  # a file object, a buffer: nothing to point at
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    try:
        size: Optional[int] = os.path.getsize(path) if os.path.isfile(path) else None
    except OSError:
        size = None
    if _said[0] >= ARTIFACTS_MAX:
        STATE.dropped["artifacts"] = STATE.dropped.get("artifacts", 0) + 1
        return False
    _said[0] += 1
    if step is None and SLOT[0] is not None:
        step = SLOT[0][0]  # the latest progress: when it was made
    if not isinstance(step, (int, float)) or isinstance(step, bool):
        step = None
    enqueue_event(
        "artifact",
        {
            "path": path,
            "name": os.path.basename(path.rstrip(os.sep)) or path,
            "kind": kind or kind_of(path),
            "bytes": size,
            "step": step,
            "by": by,
        },
    )
    return True
