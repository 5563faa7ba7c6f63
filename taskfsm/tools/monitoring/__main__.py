"""``python -m taskfsm.tools.monitoring [--check]``."""

import sys

from taskfsm.tools.monitoring import main

sys.exit(main())
