"""Unmodified: imports its own `worker` and `bridge` modules, also in a Python subprocess."""
import subprocess
import sys

import bridge
import worker

print("fetch ->", worker.fetch(1))
print("bridge ->", bridge.NAME)
sys.stdout.flush()
sub = subprocess.run([sys.executable, "-c", "import worker; print('sub fetch ->', worker.fetch(2))"],
                     capture_output=True, text=True)
print(sub.stdout.strip() or sub.stderr.strip())
