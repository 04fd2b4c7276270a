"""A flow's ``@human_feedback(emit=[...])`` review in Slack offers the flow's outcomes as the
reviewer's choices: one button per outcome in the author's words, each opening a feedback
box whose words CrewAI gives the flow, instead of Approve / Request changes / Reject. The
buttons are a door of the review policy like the decision buttons (same words, nothing
changes on a refusal) and idempotent like them. End to end through the stand-in, on
CrewAI's documented ``emit=["approved", "rejected", "needs_revision"]`` flow (its
``llm="gpt-4o-mini"`` is never contacted: the reviewer's choice routes the flow)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.slack import block_text, review_blocks, text
from bot.slack.handlers import said
from bot.slack.outcome_blocks import outcome_modal
from bot.slack.outcome_payloads import parse_outcome_click, parse_outcome_submission
from bot.slack.payloads import PayloadError
from crew_runtime import policy
from crew_runtime.config import Config
from crew_runtime.policy import Facts
from sandbox.blockkit import validate_blocks, validate_view
from storage import DecisionKind, FlowFeedbackDetails, Review, ReviewStatus, RunStatus, Store
from tests.support.crews import effects
from tests.support.harness import ON_SQLITE
from tests.support.records import NOW, make_review, make_run
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    buttons,
    configured,
    modal_for,
    review_with_buttons,
    root_of,
    slack_and_bot,
    text_of,
    wait_until,
)

Json = dict[str, Any]

CONFIG = f"""
[flows.documented]
factory = "tests.support.shape_crews:documented_feedback_flow"
reviewers = ["{ALICE}"]

[flows.own]
factory = "tests.support.shape_crews:documented_feedback_flow"
reviewers = ["{ALICE}", "{BOB}"]
forbid_self_approval = true
"""
OUTCOMES = ("approved", "rejected", "needs_revision")
HOSTILE = "<!channel> *ship* it & <@U123> `now`"


def _flow_review(outcomes: tuple[str, ...]) -> Review:
    details = FlowFeedbackDetails(
        task="draft",
        description="Review this draft:",
        agent="DocFlow",
        flow_id="f-1",
        outcomes=outcomes,
    )
    return make_review("Draft 1 on otters", stream="flow:draft", details=details)


def test_a_flow_review_offers_one_button_per_outcome_in_its_authors_words() -> None:
    outcomes = (*OUTCOMES, HOSTILE, "x" * 200, *(f"o{n}" for n in range(60)))
    review = _flow_review(outcomes)
    (message,) = review_blocks.review_messages(review, make_run())
    assert validate_blocks(message.blocks) == []
    shown = buttons({"blocks": message.blocks})
    assert "countersign:approve" not in shown and "countersign:changes" not in shown
    labels = [b["text"]["text"] for b in shown.values() if "outcome" in b["action_id"]]
    assert labels[:4] == [*OUTCOMES, HOSTILE]  # plain text: shown as the author wrote it
    assert len(labels) == 50 and len(labels[4]) == 75
    assert shown["countersign:outcome:0"]["style"] == "primary"
    assert shown["countersign:outcome:1"]["style"] == "danger"
    assert "style" not in shown["countersign:outcome:2"]
    assert "countersign:claim" in shown
    for index in (0, 1, 2, 3):
        view = outcome_modal(review, index, CHANNEL, "1.2")
        assert validate_view(view) == []
        (field,) = [b for b in view["blocks"] if b["type"] == "input"]
        assert field["optional"] is (index < 2)  # a change request carries words
    hostile = json.dumps(outcome_modal(review, 3, CHANNEL, "1.2")["blocks"])
    assert "<!channel>" not in hostile and "&lt;!channel&gt;" in hostile


def test_the_decision_line_names_the_chosen_outcome() -> None:
    from dataclasses import replace

    from storage.records import Decision

    review = _flow_review((*OUTCOMES, HOSTILE))
    decision = Decision(
        review_id=review.id,
        run_id=review.run_id,
        kind=DecisionKind.CHANGES,
        text="mention the rivers",
        original=None,
        details={"outcome": HOSTILE},
        decided_by="U0BOB",
        created_at=NOW,
    )
    decided = replace(review, status=ReviewStatus.DECIDED, decision=decision)
    message = review_blocks.decided_message(decided)
    assert validate_blocks(message.blocks) == []
    line = block_text.decision_line(decision)
    assert line.endswith("chose `&lt;!channel&gt; *ship* it &amp; &lt;@U123&gt; 'now'`")
    assert line in text_of({"blocks": message.blocks})


def _click(action: str, value: str = "rev_1") -> Json:
    return {
        "type": "block_actions",
        "user": {"id": ALICE},
        "trigger_id": "1.2.abc",
        "container": {"channel_id": CHANNEL, "message_ts": "1.2"},
        "actions": [{"action_id": action, "value": value}],
    }


def _submission(meta: Any, callback: str = "countersign:modal:outcome") -> Json:
    return {
        "type": "view_submission",
        "user": {"id": ALICE},
        "view": {
            "id": "V1",
            "callback_id": callback,
            "private_metadata": json.dumps(meta),
            "state": {"values": {"text": {"value": {"value": "more rivers"}}}},
        },
    }


def test_outcome_payloads_name_a_place_never_the_authors_words() -> None:
    click = parse_outcome_click(_click("countersign:outcome:2"))
    assert (click.index, click.review_id, click.user_id) == (2, "rev_1", ALICE)
    for action in ("countersign:outcome:x", "countersign:outcome:100", "countersign:approve"):
        with pytest.raises(PayloadError):
            parse_outcome_click(_click(action))
    with pytest.raises(PayloadError):
        parse_outcome_click(_click("countersign:outcome:0", value="<!channel>"))
    meta = {"review_id": "rev_1", "outcome": 1, "channel_id": CHANNEL, "message_ts": None}
    sent = parse_outcome_submission(_submission(meta))
    assert (sent.index, sent.text, sent.view_id, sent.message_ts) == (1, "more rivers", "V1", None)
    for bad in (
        {**meta, "outcome": "approved"},
        {**meta, "outcome": True},
        {**meta, "outcome": -1},
    ):
        with pytest.raises(PayloadError):
            parse_outcome_submission(_submission(bad))
    with pytest.raises(PayloadError):
        parse_outcome_submission(_submission(meta, "countersign:modal:changes"))


@pytest.fixture
def setup(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Config, Store, Path]]:
    path = tmp_path / "effects.jsonl"
    monkeypatch.setenv("COUNTERSIGN_TEST_EFFECTS", str(path))
    with configured(tmp_path, db_url, CONFIG) as (config, store):
        yield config, store, path


def _outcome_button(message: Json, outcome: str) -> str:
    found = [b["action_id"] for b in buttons(message).values() if b["text"]["text"] == outcome]
    assert found, f"no button {outcome!r} in {text_of(message)!r}"
    return found[0]


def _state(store: Store, review_id: str) -> tuple[Any, ...]:
    review = store.get_review(review_id)
    return review.status, review.decision is not None, len(review.approvals)


@pytest.mark.slow
@ON_SQLITE
def test_choosing_needs_revision_runs_its_listener_then_approved_finishes(
    setup: tuple[Config, Store, Path],
) -> None:
    config, store, effects_file = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run documented topic=otters")
        root = root_of(slack)
        first = review_with_buttons(slack, root["ts"])
        assert "Draft 1 on otters" in text_of(first)
        assert validate_blocks(first["blocks"]) == []
        labels = [b["text"]["text"] for b in buttons(first).values()]
        assert labels[:3] == list(OUTCOMES)
        (run,) = store.list_runs()
        (review,) = store.list_reviews(run_id=run.id)

        # An outsider's click: the policy's words, as the decision buttons say them.
        refused = policy.decide(
            config.crews["documented"], run, review, MALLORY, None, Facts(vouched=False)
        )
        assert refused is not None
        words = said(refused, review, run)
        assert words == text.NOT_A_REVIEWER
        before = _state(store, review.id)
        slack.click_button(MALLORY, CHANNEL, first["ts"], _outcome_button(first, "approved"))
        wait_until(
            lambda: words in json.dumps(slack.open_views(MALLORY)),
            what="Mallory's modal to say why not",
        )
        assert not any(
            b.get("block_id") == "text"
            for v in slack.open_views(MALLORY)
            for b in v.get("blocks", [])
        )
        assert _state(store, review.id) == before

        # Alice asks for a revision: the box is needed, then the needs_revision listener runs.
        slack.click_button(ALICE, CHANNEL, first["ts"], _outcome_button(first, "needs_revision"))
        form = modal_for(slack, ALICE)
        assert "needs_revision" in text_of({"blocks": form["blocks"]})
        blank = slack.submit_view(ALICE, form["id"], {"text": "   "})  # Slack sends spaces
        assert blank.json["errors"]["text"] == text.EMPTY_TEXT
        sent = slack.submit_view(ALICE, form["id"], {"text": "mention the rivers"})
        assert sent.status == 200 and not (sent.json or {}).get("errors")
        second = review_with_buttons(slack, root["ts"], after=first["ts"])
        assert "Draft 2 on otters" in text_of(second)
        notes = [e for e in effects(effects_file) if e["kind"] == "flow_outcome"]
        assert [(e["outcome"], e.get("feedback")) for e in notes] == [
            ("needs_revision", "mention the rivers")
        ]
        decided = store.get_review(review.id)
        assert decided.decision is not None and decided.decision.kind is DecisionKind.CHANGES
        line = block_text.decision_line(decided.decision)
        assert "chose `needs_revision`" in line
        wait_until(
            lambda: any(
                m["ts"] == first["ts"] and "chose `needs_revision`" in text_of(m)
                for m in slack.thread(CHANNEL, root["ts"])
            ),
            what="the first review's message to name the outcome chosen",
        )

        # Slack sending the submission again records nothing more (idempotent).
        again = slack.retry(sent)
        assert again.status == 200 and not (again.json or {}).get("errors")
        (pending,) = store.list_reviews(run_id=run.id)  # the second draft's, pending
        assert pending.id == buttons(second)["countersign:outcome:0"]["value"] != review.id
        assert store.get_review(review.id).decision == decided.decision

        # Approved finishes: the box may stay empty.
        slack.click_button(ALICE, CHANNEL, second["ts"], _outcome_button(second, "approved"))
        form = modal_for(slack, ALICE)
        assert slack.submit_view(ALICE, form["id"], {"text": ""}).status == 200
        done = wait_until(
            lambda: (r := store.get_run(run.id)).status.value in ("succeeded", "failed") and r,
            what="the flow to finish",
        )
        assert done.status == RunStatus.SUCCEEDED, done.error
        assert done.output == "PUBLISHED: Draft 2 on otters"
        notes = [e["outcome"] for e in effects(effects_file) if e["kind"] == "flow_outcome"]
        assert notes == ["needs_revision", "approved"]


@pytest.mark.slow
@ON_SQLITE
def test_the_outcome_modal_is_a_door_of_the_review_policy(
    setup: tuple[Config, Store, Path],
) -> None:
    """The click and the submission ask the policy with the kind the choice is recorded as:
    who started the run may not choose ``approved`` where the crew forbids self-approval (the
    policy's words), yet may send it back; forged submissions (an outsider's, an approval
    smuggled into a change request's form, an outcome the review has not) are refused with
    the policy's words; none changes anything."""
    config, store, _effects = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run own topic=otters")
        root = root_of(slack)
        first = review_with_buttons(slack, root["ts"])
        (run,) = store.list_runs()
        (review,) = store.list_reviews(run_id=run.id)
        spec = config.crews["own"]
        before = _state(store, review.id)

        own = policy.decide(spec, run, review, ALICE, DecisionKind.APPROVE, Facts())
        assert own is not None and own.reason is policy.Reason.OWN_RUN
        own_words = said(own, review, run)
        slack.click_button(ALICE, CHANNEL, first["ts"], _outcome_button(first, "approved"))
        wait_until(
            lambda: own_words in json.dumps(slack.open_views(ALICE)),
            what="Alice's modal to say why she may not approve her own run",
        )
        assert _state(store, review.id) == before
        for view in slack.open_views(ALICE):
            slack.close_view(ALICE, view["id"])

        # Sending it back is no approval: the starter may open that form.
        slack.click_button(ALICE, CHANNEL, first["ts"], _outcome_button(first, "needs_revision"))
        form = modal_for(slack, ALICE)

        def forged(user: str, index: int) -> Any:
            """A submission Slack's client would not send: by ``user``, of outcome ``index``."""
            meta = {**json.loads(form["private_metadata"]), "outcome": index}
            values = {"text": {"value": {"type": "plain_text_input", "value": "ship it"}}}
            view = {**form, "private_metadata": json.dumps(meta), "state": {"values": values}}
            return slack.send_interaction(
                {
                    "type": "view_submission",
                    "user": {"id": user, "username": user.lower()},
                    "trigger_id": "forged",
                    "view": view,
                }
            ).json["errors"]["text"]

        outsider = policy.decide(spec, run, review, MALLORY, DecisionKind.CHANGES, Facts())
        assert outsider is not None
        assert forged(MALLORY, 2) == said(outsider, review, run) == text.NOT_A_REVIEWER
        assert forged(ALICE, 0) == own_words  # "approved" smuggled into her form
        assert forged(ALICE, 7) == block_text.OUTCOME_GONE
        assert _state(store, review.id) == before

        assert slack.submit_view(ALICE, form["id"], {"text": "mention the rivers"}).status == 200
        second = review_with_buttons(slack, root["ts"], after=first["ts"])
        assert "Draft 2 on otters" in text_of(second)
        chosen = store.get_review(review.id).decision
        assert chosen is not None and chosen.details.get("outcome") == "needs_revision"
