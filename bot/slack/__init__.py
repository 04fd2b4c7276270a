"""The Slack surface: what people see and do in Slack, and how the bot answers.

The inbox intake (``intake``), Bolt's listeners (``listeners``) and the slash commands
(``commands``), who may decide (``authz``), the payloads Slack sends (``payloads``), the
Block Kit messages (``blocks``) and modals (``modals``) built from shared pieces
(``elements``), their words (``block_text``), the answers to a person (``text``), safe mrkdwn
(``mrkdwn``), thread replies read as decisions (``replies``), and the outbox ``dispatcher``
that posts the messages. It imports neither
``bot.hosting`` nor ``bot.cli``.
"""
