"""The bot: Countersign's Slack app, its command line and the process that hosts them.

Subpackages, by concept:

- ``bot.slack``: the Slack surface (intake, listeners, slash commands, Block Kit, the outbox
  dispatcher);
- ``bot.hosting``: ``countersign serve``'s process (HTTP and Socket Mode endpoints, the
  server, the worker pool);
- ``bot.cli``: the ``countersign`` command line, one module per command group.

The offline stand-in for Slack that ``countersign demo`` serves is not part of the bot: it
is the top-level package ``sandbox``, which only ``bot.cli.demo`` imports (lazily).

``bot.settings`` (the environment, read once) and ``bot.errors`` are shared by all of them.
"""
