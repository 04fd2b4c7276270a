"""The Slack surface: what people see and do in Slack, and how the bot answers.

The inbox intake (``intake``), Bolt's listeners (``listeners``) and the slash commands
(``commands``), who may decide (``authz``), the payloads Slack sends (``payloads``), the
Block Kit messages and modals (``blocks``) in the words of ``text``, thread replies read as
decisions (``replies``), and the outbox ``dispatcher`` that posts them. It imports neither
``bot.hosting`` nor ``bot.cli``.
"""
