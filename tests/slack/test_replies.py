"""Thread replies map to typed decisions by the documented rules, and never raise."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack import replies
from bot.slack.replies import APPROVE_PHRASES, Reply, interpret_reply
from storage.status import ALLOWED_DECISIONS, DecisionKind, ReviewKind

FAST = settings(deadline=None, max_examples=200)
TASK = ReviewKind.TASK_REVIEW
TOOL = ReviewKind.TOOL_APPROVAL
QUESTION = ReviewKind.QUESTION
APPROVE = Reply(DecisionKind.APPROVE, None)


@pytest.mark.parametrize(
    ("said", "kind", "expected"),
    [
        ("approve", TASK, APPROVE),
        ("<@U0BOT> LGTM!", TASK, APPROVE),
        ("<@U0BOT|countersign>: Ship it.", TASK, APPROVE),
        ("approved, ship it :+1:", TASK, APPROVE),
        (":+1::skin-tone-4:", TASK, APPROVE),
        ("👍🏾", TASK, APPROVE),
        ("Looks good to me!", TASK, APPROVE),
        (
            "approve but shorten the intro",
            TASK,
            Reply(DecisionKind.CHANGES, "approve but shorten the intro"),
        ),
        ("approvedly", TASK, Reply(DecisionKind.CHANGES, "approvedly")),
        ("+10", TASK, Reply(DecisionKind.CHANGES, "+10")),
        ("reject", TASK, Reply(DecisionKind.REJECT, None)),
        ("Rejected.", TASK, Reply(DecisionKind.REJECT, None)),
        ("reject: off topic", TASK, Reply(DecisionKind.REJECT, "off topic")),
        ("reject — off topic", TASK, Reply(DecisionKind.REJECT, "off topic")),
        ("REJECTED - too long\nand dull", TASK, Reply(DecisionKind.REJECT, "too long\nand dull")),
        ("reject it, it is wrong", TASK, Reply(DecisionKind.REJECT, "it, it is wrong")),
        ("rejection is too strong", TASK, Reply(DecisionKind.CHANGES, "rejection is too strong")),
        ("deny", TASK, Reply(DecisionKind.CHANGES, "deny")),
        ("use &lt;em&gt; &amp; cite", TASK, Reply(DecisionKind.CHANGES, "use <em> & cite")),
        ("<@U0BOT>   ", TASK, None),
        ("", TASK, None),
        ("approve", TOOL, APPROVE),
        ("go ahead", TOOL, APPROVE),
        ("deny", TOOL, Reply(DecisionKind.REJECT, None)),
        ("denied: wrong account", TOOL, Reply(DecisionKind.REJECT, "wrong account")),
        ("reject - no", TOOL, Reply(DecisionKind.REJECT, "no")),
        ("hmm, which account?", TOOL, None),
        ("42", QUESTION, Reply(DecisionKind.ANSWER, "42")),
        ("<@U0BOT> approve", QUESTION, Reply(DecisionKind.ANSWER, "approve")),
        ("ask <@U2> &amp; me", QUESTION, Reply(DecisionKind.ANSWER, "ask <@U2> & me")),
        ("  \n ", QUESTION, None),
    ],
)
def test_rules(said: str, kind: ReviewKind, expected: Reply | None) -> None:
    assert interpret_reply(said, kind) == expected


@pytest.mark.parametrize("phrase", APPROVE_PHRASES)
@pytest.mark.parametrize("kind", [TASK, TOOL])
def test_every_documented_phrase_approves(phrase: str, kind: ReviewKind) -> None:
    assert interpret_reply(phrase, kind) == APPROVE
    assert interpret_reply(f"<@U0BOT> {phrase.upper()}!", kind) == APPROVE


def test_phrases_are_documented_in_the_module() -> None:
    assert replies.__doc__ is not None
    assert "APPROVE_PHRASES" in replies.__doc__
    assert doctest.testmod(replies).failed == 0


@FAST
@given(st.text(max_size=300), st.sampled_from(list(ReviewKind)))
def test_never_raises_and_stays_within_allowed_decisions(said: str, kind: ReviewKind) -> None:
    reply = interpret_reply(said, kind)
    if reply is None:
        return
    assert reply.decision in ALLOWED_DECISIONS[kind]
    assert reply.text is None or reply.text.strip()
    if reply.decision in (DecisionKind.CHANGES, DecisionKind.ANSWER):
        assert reply.text


WORDS = st.sampled_from(
    ["approve", "lgtm", "reject", "deny", ":+1:", "👍", "<@U1>", "&amp;", "!", ",", " ", "x", ":"]
)


@FAST
@given(st.lists(WORDS, max_size=8).map("".join))
def test_task_reviews_always_get_a_decision(said: str) -> None:
    reply = interpret_reply(said, TASK)
    has_words = interpret_reply(said, QUESTION) is not None
    assert (reply is not None) == has_words
