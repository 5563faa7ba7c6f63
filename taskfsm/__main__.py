"""``python -m taskfsm`` runs the CLI."""

import sys

from taskfsm.cli import main

sys.exit(main())
