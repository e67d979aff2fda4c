"""Settings every test process shares.

SIGINT: a shell starts a background command (`scripts/test &` in a script, where job control is off)
with SIGINT ignored, and an ignored signal stays ignored across exec, so every training
child the tests start would inherit it. The worker then rightly refuses an in-band cancel
(its reply says SIGINT is ignored; docs/CLIENT.md, "cancel"), and the tests of the cancel path
would test that instead. The tests' children get the disposition an interactive user's
have: a handler installed here is reset to the default in each child at exec. The refusal
itself is tested on purpose, with SIGINT ignored in that child only.
"""

import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
