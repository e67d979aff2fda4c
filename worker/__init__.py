"""trainbridge worker: runs inside the training process (API filled in by the worker runtime)."""
