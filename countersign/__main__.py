"""``python -m countersign``: the ``countersign`` command, whose entry point is this ``main``."""

import sys

from bot.cli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
