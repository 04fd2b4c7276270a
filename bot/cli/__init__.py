"""``countersign``, the command line: ``main`` builds the parser and runs a command.

One module per command group, each taking a :class:`~bot.cli.context.Context`: ``admin``
(runs, reviews, db, crews), ``worker``, ``serve`` and ``demo``; ``render`` shows records
as tables and JSON. ``context`` holds what they share, so they import it, never ``main``
nor each other.
"""
