"""`trainbridge` and `python -m trainbridge`: the command line (trainbridge.bridge.cli).

This entry point answers `--version` without importing the client, and turns a client that
cannot load here (the `client` extra not installed, or not Linux) into one sentence and
exit status 125 instead of a traceback.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs milliseconds: --version answers without it
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Optional

EXIT_OWN_FAILURE = 125  # as env(1): trainbridge itself failed (bridge/cli.py EXIT_HELP)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] in (["--version"], ["-V"]):
        from trainbridge import __version__

        print(f"trainbridge {__version__} (Python {sys.version.split()[0]}, {sys.executable})")
        return 0
    try:
        from trainbridge.bridge.cli import main as cli_main
    except ImportError as exc:
        print(f"trainbridge: {exc}", file=sys.stderr)
        return EXIT_OWN_FAILURE
    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
