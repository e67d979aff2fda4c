"""`python -m trainbridge ...` is the `trainbridge` command."""

import sys

from trainbridge.bridge.cli import main

if __name__ == "__main__":
    sys.exit(main())
