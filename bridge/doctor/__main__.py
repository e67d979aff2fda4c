"""`python -m trainbridge.bridge.doctor`: the same command as `trainbridge doctor`."""

import sys

from trainbridge.bridge.doctor import main

sys.exit(main())
