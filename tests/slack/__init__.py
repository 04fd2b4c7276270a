"""Tests of the bot's Slack side: messages, modals, clicks, and the bot with the stand-in."""
