"""An unmodified script (zero-code mode, no worker import) imports numpy, which opens and
closes the automatic stage 'import numpy', then fails importing a module that does not exist.
The job's stage is 'main', where the error was raised (it was once reported as
'import numpy', the last stage that began, though it had finished)."""
import numpy  # opens and closes the automatic stage "import numpy"

print("numpy imported", flush=True)
import nosuchmod  # fails: the error under test
