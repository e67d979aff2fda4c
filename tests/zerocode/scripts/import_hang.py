print("before the import", flush=True)
import transformers  # hangs: tests/zerocode/scripts/slowpkgs/transformers
