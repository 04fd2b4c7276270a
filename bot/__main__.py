"""``python -m bot``: the same command line as the ``countersign`` script."""

import sys

from bot.cli import main

sys.exit(main())
