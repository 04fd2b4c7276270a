"""How the bot reads a failed Slack call (``bot.slack.slack_errors``): transient or a
refusal, and Slack's own explanation logged with the code. Real calls to the stand-in."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from slack_sdk.errors import SlackApiError

from bot.hosting.server import SlackSettings, slack_client
from bot.slack.slack_errors import explanation, is_transient
from sandbox import StandInThread
from tests.support.slack_harness import CHANNEL, new_standin

BROKEN = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]


@pytest.fixture
def slack() -> Iterator[StandInThread]:
    with StandInThread(new_standin()) as running:
        yield running


def refusal(slack: StandInThread, **call: object) -> SlackApiError:
    settings = SlackSettings(
        bot_token=slack.standin.bot_token, signing_secret="s", app_token=None, api_url=slack.api_url
    )

    async def post() -> SlackApiError:
        client = slack_client(settings, retry_lost_answers=False)
        try:
            await client.chat_postMessage(channel=CHANNEL, text="hi", **call)
        except SlackApiError as exc:
            return exc
        raise AssertionError("Slack took it")

    return asyncio.run(post())


def test_slacks_explanation_of_a_refusal_is_logged_with_its_code(
    slack: StandInThread, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="bot.hosting.server"):
        exc = refusal(slack, blocks=BROKEN)
    said = explanation(exc)
    assert said.startswith("invalid_blocks (")
    assert "[json-pointer:/blocks/0" in said
    logged = [r.getMessage() for r in caplog.records if r.name == "bot.hosting.server"]
    assert logged == [f"slack refused chat.postMessage: {said}"]
    assert not is_transient(exc)


@pytest.mark.parametrize(
    ("fault", "transient"),
    [
        ({"status": 200, "error": "not_in_channel"}, False),
        ({"status": 200, "error": "msg_too_long"}, False),
        ({"status": 200, "error": "account_inactive"}, False),
        ({"status": 200, "error": "fatal_error"}, True),
        ({"status": 200, "error": "internal_error"}, True),
        ({"status": 503}, True),  # an HTTP page, no error code: Slack's trouble
    ],
)
def test_transient_failures_are_told_from_refusals(
    slack: StandInThread, fault: dict[str, object], transient: bool
) -> None:
    slack.fail_next("chat.postMessage", **fault)  # type: ignore[arg-type]
    assert is_transient(refusal(slack)) is transient


def test_slacks_words_stay_on_one_line(slack: StandInThread) -> None:
    slack.standin.grants = type(slack.standin.grants)(frozenset(), frozenset())
    said = explanation(refusal(slack))
    assert said == "missing_scope (needed chat:write)"
    assert "\n" not in explanation(refusal_with_newline(slack))


def refusal_with_newline(slack: StandInThread) -> SlackApiError:
    slack.standin.grants = type(slack.standin.grants).everything()
    broken = [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}, "bad\nfield": 1}]
    return refusal(slack, blocks=broken)
