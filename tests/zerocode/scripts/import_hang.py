print("before the import", flush=True)
import transformers  # noqa: E402,F401  (hangs: scripts/slowpkgs/transformers)
