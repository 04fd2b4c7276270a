"""``python -m bot``: the same command line as the ``countersign`` script.

A worker started by serve (``--parent-pid``) ties its life to serve's before anything
else: importing the CLI takes seconds, and a serve killed meanwhile must not leave it
running on its own.
"""

import sys

from bot.hosting.parent import die_with_parent, parent_pid

if (_parent := parent_pid(sys.argv[1:])) is not None:
    die_with_parent(_parent)

from bot.cli.main import main  # after the parent check, on purpose

sys.exit(main())
