"""`python -m trainbridge.bridge.doctor`: the same command as `trainbridge doctor`."""

import sys

from trainbridge.bridge.doctor.cli import main

sys.exit(main())
