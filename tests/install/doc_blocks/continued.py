# Prepended (doc-test marker `with continued.py`) to a Python block that goes on from one above
# it: the imports that block made.
from trainbridge import bridge, worker  # noqa: F401
