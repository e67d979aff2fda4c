"""Settings every test process shares.

SIGINT: a shell starts a background command (`scripts/test &` in a script, where job control is off)
with SIGINT ignored, and an ignored signal stays ignored across exec, so every training
child the tests start would inherit it. The worker then rightly refuses an in-band cancel
(its reply says SIGINT is ignored; docs/CLIENT.md, "cancel"), and the tests of the cancel path
would test that instead. The tests' children get the disposition an interactive user's
have: a handler installed here is reset to the default in each child at exec. The refusal
itself is tested on purpose, with SIGINT ignored in that child only.

XDG_RUNTIME_DIR: each pytest-xdist worker gets its own (short: ipc paths are limited to 107
bytes). A client sweeps the runtime directories that dead clients of its user left,
so with one shared base a test in another worker swept the directory of a keeper
this test had just SIGKILLed, before the test could look at it. Node clients the tests start
inherit it.
"""

import atexit
import os
import shutil
import signal
import tempfile

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Every Job of the tests, and of the keepers and job servers they start, checks that its
# machine steps and publishes run on the hub's I/O thread (bridge/hub.py, Hub.io_only).
os.environ["TRAINBRIDGE_CHECK_THREADS"] = "1"

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    _base = tempfile.mkdtemp(prefix=f"tb-{_worker}-", dir="/tmp")
    os.environ["XDG_RUNTIME_DIR"] = _base
    atexit.register(shutil.rmtree, _base, ignore_errors=True)
