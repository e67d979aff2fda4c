"""An exception whose message carries terminal escapes and says what to do only after its
first 300 characters, as torch.load's "Weights only load failed" does."""
from trainbridge import worker
from _common import say

MESSAGE = (
    "Weights only load failed. This file can still be loaded, to do so you have two options, "
    "\x1b[1mdo those steps only if you trust the source of the checkpoint\x1b[0m. \n\t(1) In "
    "PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` "
    "from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will "
    "likely succeed, but it can result in arbitrary code execution. Do it only if you got the "
    "file from a trusted source.\n\t(2) Alternatively, to load with `weights_only=True` please "
    "check the recommended steps in the following error message.")


def load_checkpoint():
    raise RuntimeError(MESSAGE)


if __name__ == "__main__":
    with worker.stage("load"):
        say("loading the checkpoint")
        load_checkpoint()
