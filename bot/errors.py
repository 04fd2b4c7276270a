"""The bot's errors, the ``BotError`` subtree of ``CountersignError`` (the whole tree is drawn
in ``storage.errors``). Each class lives with the code that raises it."""

from __future__ import annotations

from storage.errors import CountersignError


class BotError(CountersignError):
    """Base class of the bot's errors: Slack, the command line, hosting."""
