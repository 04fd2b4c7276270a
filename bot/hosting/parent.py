"""A child process that must not outlive its parent: serve's worker (``--parent-pid PID``).

Standard library only, and nothing slow to import: ``bot.__main__`` calls it before it
imports the CLI, which pulls in SQLAlchemy (and the worker, CrewAI) for seconds during
which the parent may be killed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Sequence

FLAG = "--parent-pid"

_PR_SET_PDEATHSIG = 1


def parent_pid(argv: Sequence[str]) -> int | None:
    """The pid after ``--parent-pid``, as serve passes it; None if absent or not a number.

    Only the two-word form is read here; the CLI's parser reads any form, after its imports.
    """
    if FLAG not in argv[:-1]:
        return None
    value = argv[argv.index(FLAG) + 1]
    return int(value) if value.isdigit() else None


def die_with_parent(parent: int) -> None:
    """Get SIGTERM when the parent dies, even by SIGKILL; exit now if it is gone already.

    Linux's ``PR_SET_PDEATHSIG`` covers what happens from now on. The parent given on the
    command line covers what happened before: had it died since it started this process,
    the process was re-parented and ``getppid()`` is another pid. Elsewhere than Linux
    only that check is made (a worker that outlives its parent is a complete worker,
    so nothing is lost, only a process left).

    Args:
        parent: The pid of the process that started this one, as it passed it.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        print(f"the parent process {parent} is gone; exiting", file=sys.stderr)
        sys.exit(1)
