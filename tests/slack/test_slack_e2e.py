"""The product end to end: signed Slack traffic from the stand-in to the real bot's HTTP endpoint.

Crews run on the scripted LLM through the real CrewAI loop, in the bot's embedded
worker pool; what the reviewer sees is what the bot posted to the stand-in.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crew_runtime.config import Config
from crew_runtime.offline.drafts import parse_draft
from sandbox import Tamper
from storage import RunStatus, Store
from tests.support.harness import ON_SQLITE
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    MALLORY,
    buttons,
    draft_in,
    modal_for,
    review_with_buttons,
    root_of,
    slack_and_bot,
    text_of,
    wait_until,
)

Json = dict[str, Any]

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.research]
factory = "tests.support.crews:research"
description = "Searches, asks a human, publishes"

[crews.slowpoke]
factory = "tests.support.crews:writer"
description = "Reviews that remind, escalate and expire quickly"
reviewers = ["{ALICE}"]
remind_after = "1s"
escalate_after = "2s"
escalate_to = ["{BOB}"]
expire_after = "3s"

[flows.article]
factory = "tests.support.crews:article_flow"
description = "A CrewAI Flow reviewed with @human_feedback"

[crews.payments]
factory = "tests.support.crews:payments"
description = "Pays a supplier; large payments are gated"
reviewers = ["{ALICE}"]

[crews.longform]
factory = "tests.support.crews:longform"
description = "One very long draft"

[crews.typed]
factory = "tests.support.typed_crews:typed"
description = "A typed outline, reviewed, then an article from it"
channel = "{CHANNEL}"
reviewers = ["{ALICE}"]
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


@ON_SQLITE
def test_run_review_revise_edit_approve_through_slack(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        started = slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        assert started.status == 200
        root = root_of(slack)
        assert "writer" in text_of(root)

        first = review_with_buttons(slack, root["ts"])
        assert draft_in(first).startswith("Outline v0")
        assert set(buttons(first)) >= {
            "countersign:approve",
            "countersign:edit",
            "countersign:changes",
            "countersign:reject",
        }
        assert all(b["value"].startswith("rev_") for b in buttons(first).values())

        slack.click_button(ALICE, CHANNEL, first["ts"], "countersign:changes")
        view = modal_for(slack, ALICE)
        assert slack.submit_view(ALICE, view["id"], {"text": "make it shorter"}).status == 200

        second = review_with_buttons(slack, root["ts"], after=first["ts"])
        revised = parse_draft(draft_in(second))
        assert revised.feedback == ("make it shorter",) and revised.saw_previous_draft
        decided = wait_until(
            lambda: next(
                (
                    m
                    for m in slack.thread(CHANNEL, root["ts"])
                    if m["ts"] == first["ts"] and not buttons(m)
                ),
                None,
            ),
            what="the first review message to lose its buttons",
        )
        assert ALICE in text_of(decided)

        slack.click_button(BOB, CHANNEL, second["ts"], "countersign:edit")
        edit_view = modal_for(slack, BOB)
        (field,) = [b for b in edit_view["blocks"] if b.get("block_id") == "text"]
        prefilled = field["element"].get("initial_value", "")
        assert prefilled.startswith("Outline v1")
        edited = "1. Otters hold hands. 2. Otters use stones."
        assert slack.submit_view(BOB, edit_view["id"], {"text": edited}).status == 200

        article = review_with_buttons(slack, root["ts"], after=second["ts"])
        assert parse_draft(draft_in(article)).context == edited
        slack.click_button(ALICE, CHANNEL, article["ts"], "countersign:approve")

        run = wait_until(
            lambda: next((r for r in store.list_runs() if r.status == RunStatus.SUCCEEDED), None),
            what="the run to succeed",
        )
        assert parse_draft(run.output or "").context == edited
        final = wait_until(
            lambda: next(
                (
                    m
                    for m in slack.thread(CHANNEL, root["ts"])
                    if "Article v0" in text_of(m) and not buttons(m) and m["ts"] != article["ts"]
                ),
                None,
            ),
            what="the result in the thread",
        )
        assert final
        wait_until(
            lambda: "succeeded" in text_of(slack.messages(CHANNEL)[0]).lower(),
            what="the root message to show the run succeeded",
        )


@ON_SQLITE
@pytest.mark.parametrize("socket_mode", [False, True], ids=["http", "socket-mode"])
def test_question_answered_by_a_thread_reply(
    setup: tuple[Config, Store], socket_mode: bool
) -> None:
    config, store = setup
    with slack_and_bot(config, store, socket_mode=socket_mode) as (slack, _bot):
        slack.slash_command(BOB, CHANNEL, "/crew", 'run research topic="sea otters"')
        root = root_of(slack)
        question = review_with_buttons(slack, root["ts"])
        assert "Formal or casual" in text_of(question)
        assert "countersign:answer" in buttons(question)
        slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "casual, please")
        run = wait_until(
            lambda: next((r for r in store.list_runs() if r.status == RunStatus.SUCCEEDED), None),
            what="the run to succeed",
        )
        assert "ask_human: casual, please" in parse_draft(run.output or "").notes


@ON_SQLITE
def test_non_reviewer_click_changes_nothing(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        slack.click_button(MALLORY, CHANNEL, review["ts"], "countersign:approve")
        told = wait_until(lambda: slack.ephemerals(MALLORY), what="an ephemeral for Mallory")
        assert "not a reviewer" in told[-1].text.lower()
        (pending,) = store.list_reviews()
        assert pending.decision is None
        slack.reply_in_thread(MALLORY, CHANNEL, root["ts"], "lgtm")
        wait_until(lambda: len(slack.ephemerals(MALLORY)) >= 2, what="a second refusal")
        assert store.list_reviews()[0].decision is None


def _succeeded(store: Store) -> Any:
    return wait_until(
        lambda: next((r for r in store.list_runs() if r.status == RunStatus.SUCCEEDED), None),
        what="the run to succeed",
    )


def test_duplicate_deliveries_decide_once(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        first = review_with_buttons(slack, root["ts"])
        click = slack.click_button(ALICE, CHANNEL, first["ts"], "countersign:approve")
        assert click.status == 200
        assert slack.retry(click, num=1).status == 200
        assert slack.retry(click, num=2).status == 200
        second = review_with_buttons(slack, root["ts"], after=first["ts"])
        reply = slack.reply_in_thread(BOB, CHANNEL, root["ts"], "lgtm")
        slack.retry(reply, num=1)
        slack.retry(reply, num=2, reason="http_error")
        _succeeded(store)
        decisions = [r.decision for r in store.list_reviews(status=None)]
        assert [(d.kind, d.decided_by) for d in decisions if d] == [
            ("approve", ALICE),
            ("approve", BOB),
        ]
        # One resume per decision: the outline was drafted once, the article once.
        assert slack.thread(CHANNEL, root["ts"])
        # Slack never retries a click; sent again within the second it is byte for byte the
        # same request (one record), later it is another one that finds the review decided.
        # An event sent again is the same message either way: handled once, told nothing.
        assert not slack.ephemerals(BOB), "a retried event must not be handled twice"
        assert second


def test_two_reviewers_race_one_decision_wins(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        slack.click_button(BOB, CHANNEL, review["ts"], "countersign:reject")
        reject_view = modal_for(slack, BOB)
        told_before = len(slack.ephemerals(ALICE))
        results: dict[str, Any] = {}

        def approve() -> None:
            results["approve"] = slack.click_button(
                ALICE, CHANNEL, review["ts"], "countersign:approve"
            )

        def reject() -> None:
            results["reject"] = slack.submit_view(BOB, reject_view["id"], {"text": "off-brand"})

        racers = [threading.Thread(target=approve), threading.Thread(target=reject)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        assert results["approve"].status == 200 and results["reject"].status == 200
        decided = wait_until(
            lambda: next((r for r in store.list_reviews(status=None) if r.decision), None),
            what="a decision",
        )
        assert decided.decision is not None
        winner = decided.decision.decided_by
        loser = BOB if winner == ALICE else ALICE
        if loser == ALICE:
            told = wait_until(
                lambda: slack.ephemerals(ALICE)[told_before:], what="Alice told she lost"
            )
            assert "already" in told[-1].text.lower()
        else:
            errors = (results["reject"].json or {}).get("errors", {})
            assert "already" in errors.get("text", "").lower()
        assert len([r for r in store.list_reviews(status=None) if r.decision]) == 1


@pytest.mark.parametrize(
    "tamper", [Tamper.BAD_SIGNATURE, Tamper.STALE_TIMESTAMP, Tamper.NO_SIGNATURE]
)
@ON_SQLITE
def test_unsigned_or_forged_requests_are_refused(
    setup: tuple[Config, Store], tamper: Tamper
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        refused = slack.slash_command(
            ALICE, CHANNEL, "/crew", "run writer topic=otters", tamper=tamper
        )
        assert refused.status == 401
        assert store.list_runs() == []
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        forged = slack.click_button(
            ALICE, CHANNEL, review["ts"], "countersign:approve", tamper=tamper
        )
        assert forged.status == 401
        reply = slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "approve", tamper=tamper)
        assert reply.status == 401
        assert store.list_reviews()[0].decision is None


@ON_SQLITE
def test_llm_text_cannot_ping_or_link(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        nasty = "<!channel> <@U123> <https://evil|click>"
        slack.slash_command(ALICE, CHANNEL, "/crew", f'run writer topic="{nasty}"')
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        for message in (root, review):
            shown = text_of(message)
            for raw in ("<!channel>", "<@U123>", "<https://evil|click>"):
                assert raw not in shown
        assert "&lt;!channel&gt;" in text_of(review)
        (run,) = store.list_runs()
        assert run.inputs == {"topic": nasty}


@ON_SQLITE
def test_a_30000_character_draft_reaches_slack(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run longform topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        assert "countersign:approve" in buttons(review)
        (upload,) = slack.files()
        (pending,) = store.list_reviews()
        assert len(pending.prompt) > 30_000
        assert pending.prompt in upload.content.decode()
        assert [c for c in slack.calls() if not c.ok] == []
        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:approve")
        _succeeded(store)
        assert [c for c in slack.calls() if not c.ok] == []
        # Nothing failed, so nothing was looked for (those methods are rate-limited hard).
        lookups = ("conversations.history", "conversations.replies", "files.info")
        assert [c.method for c in slack.calls() if c.method in lookups] == []


def test_slack_failures_are_retried_without_duplicates(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.fail_next("chat.postMessage", status=429, retry_after=1)
        slack.fail_next("chat.postMessage", status=503, times=4)
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        roots = [
            m
            for m in slack.messages(CHANNEL)
            if m.get("bot_id") and m.get("thread_ts") in (None, m["ts"])
        ]
        assert len(roots) == 1
        reviews = [m for m in slack.thread(CHANNEL, root["ts"]) if buttons(m)]
        assert [m["ts"] for m in reviews] == [review["ts"]]
        failures = [c.error for c in slack.calls("chat.postMessage") if not c.ok]
        assert "ratelimited" in failures and failures.count("http_503") == 4


@ON_SQLITE
def test_any_command_text_gets_a_helpful_answer(setup: tuple[Config, Store]) -> None:
    """Whatever people type after /crew, the bot acks in time and says something useful."""
    config, store = setup
    words = st.sampled_from(["run", "list", "status", "cancel", "pending", "help", "writer"])
    noise = st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=60,
    )
    texts = st.lists(st.one_of(words, noise, st.just('k="v'), st.just("a=b")), max_size=5)

    with slack_and_bot(config, store) as (slack, _bot):

        @settings(max_examples=40, deadline=None, derandomize=True)
        @given(texts.map(" ".join))
        def answered(command_text: str) -> None:
            before = len(slack.ephemerals(ALICE))
            delivery = slack.slash_command(ALICE, CHANNEL, "/crew", command_text)
            assert delivery.status == 200, (command_text, delivery.body)
            assert delivery.latency < 3.0
            told = wait_until(
                lambda: slack.ephemerals(ALICE)[before:], timeout=10, what="an answer"
            )
            assert told[0].text.strip()

        answered()
        for run in store.list_runs():
            assert run.crew == "writer"


@ON_SQLITE
def test_reminder_escalation_and_expiry(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run slowpoke topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])

        def said(needle: str) -> Json | None:
            return next(
                (m for m in slack.thread(CHANNEL, root["ts"]) if needle in text_of(m)), None
            )

        reminder = wait_until(lambda: said("⏰"), what="a reminder")
        assert f"<@{ALICE}>" in text_of(reminder)
        escalation = wait_until(lambda: said("🚨"), what="an escalation")
        assert f"<@{BOB}>" in text_of(escalation)
        run = wait_until(
            lambda: next((r for r in store.list_runs() if r.status == RunStatus.REJECTED), None),
            what="the run to end when its review expires",
        )
        assert run.error == "the review expired before anyone decided"
        wait_until(
            lambda: next(
                (
                    m
                    for m in slack.thread(CHANNEL, root["ts"])
                    if m["ts"] == review["ts"] and not buttons(m)
                ),
                None,
            ),
            what="the expired review to lose its buttons",
        )
        assert len([m for m in slack.thread(CHANNEL, root["ts"]) if "⏰" in text_of(m)]) == 1


@ON_SQLITE
def test_tool_approval_edit_is_validated_in_the_modal(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run payments amount=1500")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        shown = text_of(review)
        assert "pay" in shown and "1500" in shown and "ACME" in shown
        assert set(buttons(review)) == {
            "countersign:approve",
            "countersign:edit",
            "countersign:reject",
            "countersign:claim",
            "countersign:reassign",
        }
        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:edit")
        view = modal_for(slack, ALICE, "arg:amount")
        fields = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
        assert set(fields) == {"arg:amount", "arg:to"}
        assert fields["arg:amount"]["element"]["initial_value"] == "1500"
        assert fields["arg:to"]["element"]["initial_value"] == "ACME"
        refused = slack.submit_view(ALICE, view["id"], {"arg:amount": "lots", "arg:to": "ACME"})
        assert refused.problems == []
        assert "integer" in refused.json["errors"]["arg:amount"]
        (pending,) = store.list_reviews()
        assert pending.decision is None
        accepted = slack.submit_view(ALICE, view["id"], {"arg:amount": "900", "arg:to": "ACME"})
        assert accepted.status == 200 and not (accepted.json or {}).get("errors")
        run = _succeeded(store)
        assert "paid 900 to ACME" in (run.output or "")


@ON_SQLITE
def test_a_typed_draft_is_shown_as_json_and_its_edit_checked_in_the_modal(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run typed topic=otters")
        root = root_of(slack)
        message = review_with_buttons(slack, root["ts"])
        (review,) = store.list_reviews()
        escaped = review.prompt.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert f"```{escaped}```" in text_of(message)

        slack.click_button(ALICE, CHANNEL, message["ts"], "countersign:edit")
        view = modal_for(slack, ALICE)
        (field,) = [b for b in view["blocks"] if b.get("block_id") == "text"]
        assert field["element"]["initial_value"] == review.prompt
        assert "Outline" in field["label"]["text"]

        prose = slack.submit_view(ALICE, view["id"], {"text": "Otters are playful."})
        assert prose.problems == []
        assert prose.json["errors"] == {
            "text": "the output must be JSON: Expecting value (line 1, column 1)"
        }
        wrong = slack.submit_view(ALICE, view["id"], {"text": '{"headline": "Otters"}'})
        assert wrong.json["errors"] == {"text": "sections: required"}
        (pending,) = store.list_reviews()
        assert pending.decision is None

        edited = {"headline": "Otters at play", "sections": 3}
        accepted = slack.submit_view(ALICE, view["id"], {"text": json.dumps(edited)})
        assert accepted.status == 200 and not (accepted.json or {}).get("errors")
        run = _succeeded(store)
        assert json.loads(parse_draft(run.output or "").context or "") == edited


@ON_SQLITE
def test_an_approved_task_is_revised_and_later_tasks_run_again(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        assert "countersign:revise" not in buttons(outline)  # nothing before the first task
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")

        article = review_with_buttons(slack, root["ts"], after=outline["ts"])
        assert draft_in(article).startswith("Article v0")
        (run,) = store.list_runs()
        assert buttons(article)["countersign:revise"]["value"] == run.id
        slack.click_button(BOB, CHANNEL, article["ts"], "countersign:revise")
        view = modal_for(slack, BOB, "task")
        (task,) = [b for b in view["blocks"] if b.get("block_id") == "task"]
        assert [o["value"] for o in task["element"]["options"]] == ["0"]
        refused = slack.submit_view(BOB, view["id"], {"task": "0", "text": " "})
        assert "text" in refused.json["errors"]
        revised = slack.submit_view(BOB, view["id"], {"task": "0", "text": "add otters facts"})
        assert revised.status == 200 and not (revised.json or {}).get("errors")

        again = review_with_buttons(slack, root["ts"], after=article["ts"])
        wait_until(
            lambda: next(
                (
                    m
                    for m in slack.thread(CHANNEL, root["ts"])
                    if m["ts"] == article["ts"] and not buttons(m)
                ),
                None,
            ),
            what="the superseded article review to lose its buttons",
        )
        redraft = parse_draft(draft_in(again))
        assert redraft.label == "Outline"
        assert "add otters facts" in redraft.feedback and redraft.saw_previous_draft
        slack.click_button(ALICE, CHANNEL, again["ts"], "countersign:approve")

        rewritten = review_with_buttons(slack, root["ts"], after=again["ts"])
        assert parse_draft(draft_in(rewritten)).context == draft_in(again)
        slack.click_button(ALICE, CHANNEL, rewritten["ts"], "countersign:approve")
        run = _succeeded(store)
        assert parse_draft(run.output or "").context == draft_in(again)


@ON_SQLITE
def test_revising_is_refused_to_non_reviewers(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        article = review_with_buttons(slack, root["ts"], after=outline["ts"])
        slack.click_button(MALLORY, CHANNEL, article["ts"], "countersign:revise")
        wait_until(
            lambda: any("not a reviewer" in text_of(v).lower() for v in slack.open_views(MALLORY)),
            what="Mallory told she may not revise",
        )
        (pending,) = store.list_reviews()
        assert pending.decision is None
        assert len(store.list_reviews(status=None)) == 2


@ON_SQLITE
def test_crew_status_offers_to_revise_while_the_run_waits(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        (run,) = store.list_runs()

        def status() -> Any:
            before = len(slack.ephemerals(ALICE))
            slack.slash_command(ALICE, CHANNEL, "/crew", f"status {run.id}")
            return wait_until(lambda: slack.ephemerals(ALICE)[before:], what="the status")[0]

        assert "countersign:revise" not in buttons({"blocks": status().blocks})
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve")
        article = review_with_buttons(slack, root["ts"], after=outline["ts"])
        shown = status()
        assert buttons({"blocks": shown.blocks})["countersign:revise"]["value"] == run.id
        slack.click_button(ALICE, CHANNEL, shown.ts, "countersign:revise")
        view = modal_for(slack, ALICE, "task")
        slack.submit_view(ALICE, view["id"], {"task": "0", "text": "shorter, please"})
        again = review_with_buttons(slack, root["ts"], after=article["ts"])
        assert "shorter, please" in parse_draft(draft_in(again)).feedback


@ON_SQLITE
def test_a_flow_is_resumed_by_a_click_and_routed_by_it(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run article topic=otters")
        root = root_of(slack)
        review = review_with_buttons(slack, root["ts"])
        assert "Draft on otters (round 0)" in text_of(review)
        assert "Publish this draft?" in text_of(review)
        # The flow's outcomes are the buttons: emit=["approved", "rejected"].
        assert buttons(review)["countersign:outcome:1"]["text"]["text"] == "rejected"
        slack.click_button(ALICE, CHANNEL, review["ts"], "countersign:outcome:1")
        reason = modal_for(slack, ALICE)
        assert slack.submit_view(ALICE, reason["id"], {"text": "not our tone"}).status == 200
        run = _succeeded(store)
        assert run.output == "SHELVED: Draft on otters (round 0) (not our tone)"


@ON_SQLITE
def test_an_offline_run_says_so_once_before_its_first_review(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        first = review_with_buttons(slack, root["ts"])

        def notes() -> list[Json]:
            thread = slack.thread(CHANNEL, root["ts"])
            return [m for m in thread if "offline scripted model" in text_of(m)]

        (note,) = notes()
        assert float(note["ts"]) < float(first["ts"])
        assert "`COUNTERSIGN_LLM`" in text_of(note) and not buttons(note)

        slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "make it shorter")
        second = review_with_buttons(slack, root["ts"], after=first["ts"])
        assert parse_draft(draft_in(second)).feedback == ("make it shorter",)
        assert len(notes()) == 1  # the resumed run did not say it again


@ON_SQLITE
def test_the_root_message_says_the_run_waits_once_its_review_is_out(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        review_with_buttons(slack, root["ts"])
        wait_until(  # it would say "Queued" until the first decision
            lambda: "Waiting for review" in text_of(slack.thread(CHANNEL, root["ts"])[0]),
            what="the root message to say the run waits",
        )


@ON_SQLITE
def test_a_reply_also_sent_to_the_channel_or_with_a_screenshot_decides_like_any(
    setup: tuple[Config, Store],
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        first = review_with_buttons(slack, root["ts"])
        # "Also send to #channel": Slack delivers it with the subtype thread_broadcast.
        slack.reply_in_thread(ALICE, CHANNEL, root["ts"], "lgtm", also_to_channel=True)
        second = review_with_buttons(slack, root["ts"], after=first["ts"])
        # A screenshot with no words is no decision: the person is told how to reply.
        slack.reply_in_thread(BOB, CHANNEL, root["ts"], "", file_name="screenshot.png")
        wait_until(lambda: slack.ephemerals(BOB), what="a hint for Bob")
        # With words, it decides (subtype file_share).
        slack.reply_in_thread(BOB, CHANNEL, root["ts"], "ship it", file_name="screenshot.png")
        _succeeded(store)
        decisions = [r.decision for r in store.list_reviews(status=None) if r.decision]
        assert [(d.kind, d.decided_by) for d in decisions] == [
            ("approve", ALICE),
            ("approve", BOB),
        ]
        assert second


@ON_SQLITE
def test_what_people_and_the_model_wrote_is_escaped_once_everywhere(
    setup: tuple[Config, Store],
) -> None:
    """``A & B`` (in an input, a draft, feedback, a reopened task, a rejection) reaches Slack as
    ``A &amp; B`` in every message, ephemeral, modal and response: never escaped twice."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", 'run writer topic="A & B"')
        root = root_of(slack)
        outline = review_with_buttons(slack, root["ts"])
        slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:changes")
        view = modal_for(slack, ALICE)
        slack.submit_view(ALICE, view["id"], {"text": "say A & B <twice>"})
        second = review_with_buttons(slack, root["ts"], after=outline["ts"])
        slack.click_button(ALICE, CHANNEL, second["ts"], "countersign:approve")
        article = review_with_buttons(slack, root["ts"], after=second["ts"])
        (run,) = store.list_runs()
        slack.slash_command(ALICE, CHANNEL, "/crew", f"status {run.id}")
        slack.click_button(MALLORY, CHANNEL, article["ts"], "countersign:changes")
        slack.click_button(BOB, CHANNEL, article["ts"], "countersign:revise")
        view = modal_for(slack, BOB, "task")
        slack.submit_view(BOB, view["id"], {"task": "0", "text": "more A & B"})
        again = review_with_buttons(slack, root["ts"], after=article["ts"])
        slack.click_button(ALICE, CHANNEL, again["ts"], "countersign:reject")
        view = modal_for(slack, ALICE)
        slack.submit_view(ALICE, view["id"], {"text": "not A & B"})
        wait_until(
            lambda: store.get_run(run.id).status == RunStatus.REJECTED or None,
            what="the run to be rejected",
        )
        wait_until(
            lambda: (
                any("not A &amp; B" in text_of(m) for m in slack.messages(CHANNEL)[-1:]) or None
            ),
            what="the outcome in the thread",
        )
        said = json.dumps([c.params for c in slack.calls()], ensure_ascii=False)
        for shown in ("A &amp; B", "more A &amp; B", "not A &amp; B", "&lt;twice&gt;"):
            assert shown in said
        assert "&amp;amp;" not in said, said
        assert "&amp;lt;" not in said


@ON_SQLITE
def test_pending_lists_the_reviews_each_person_may_decide(setup: tuple[Config, Store]) -> None:
    """Writer's reviewers are Alice and Bob; research names none, so anyone in its channel."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        slack.slash_command(BOB, CHANNEL, "/crew", 'run research topic="sea otters"')
        wait_until(lambda: len(store.list_reviews()) == 2 or None, what="both runs to wait")
        for user, expected in ((ALICE, "2 reviews waiting"), (MALLORY, "1 review waiting")):
            before = len(slack.ephemerals(user))
            slack.slash_command(user, CHANNEL, "/crew", "pending")
            told = wait_until(
                lambda u=user, n=before: slack.ephemerals(u)[n:], what=f"{user}'s pending list"
            )
            assert told[0].text == expected
        [research] = [r for r in store.list_reviews() if r.kind == "question"]
        assert research.id in json.dumps(told[0].blocks)
