"""A grandchild escapes into its own session (setsid), keeps our stdout open, and outlives
the script, which ends normally. The client must neither wait for it nor leave it behind."""
import subprocess
import sys

from trainbridge import worker
from _common import say

GRANDCHILD = "import time; time.sleep(3600)"

with worker.stage("data"):
    subprocess.Popen([sys.executable, "-c", GRANDCHILD], start_new_session=True)
    worker.progress(1, 1)
say("script done, grandchild still running")
