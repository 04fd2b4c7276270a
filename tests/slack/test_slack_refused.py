"""What Slack refuses for good is given up on, said and recorded, never retried forever:
the real bot (``Deployment``) on a real port, Slack played by the stand-in, which refuses as
Slack does (a channel the bot is not in, an archived one, a revoked token, a broken message).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.slack import refusal_text
from crew_runtime import metrics
from crew_runtime.config import Config
from storage import ReviewStatus, RunStatus, Store
from storage.outbox import GIVEN_UP
from storage.schema import outbox
from tests.support.cli import Cli
from tests.support.harness import ON_SQLITE
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    buttons,
    review_with_buttons,
    root_of,
    slack_and_bot,
    text_of,
    wait_until,
)

Json = dict[str, Any]
NOBOT = "C0NOBOT"

CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.uninvited]
factory = "tests.support.crews:writer"
description = "Its channel has not invited the bot"
channel = "{NOBOT}"
"""

pytestmark = [pytest.mark.slow, pytest.mark.bot_config(CONFIG)]


@pytest.fixture
def cli(setup: tuple[Config, Store], db_url: str, tmp_path: Path, capsys: Any) -> Cli:
    return Cli(db_url, tmp_path / "countersign.toml", capsys)


def refusals(cli: Cli, run_id: str) -> list[Json]:
    """The run's given-up Slack steps as ``countersign audit export`` (JSONL) has them."""
    out = cli.ok("audit", "export", "--since", "2000-01-01", "--until", "2100-01-01").out
    records = [json.loads(line) for line in out.splitlines()]
    return [r for r in records if r["run_id"] == run_id and r["decision"] == "slack_refused"]


def one_record_per_given_up_step(store: Store, cli: Cli, run_id: str) -> dict[int, Json]:
    """Each of the run's rows given up on has exactly one audit record: outbox id -> it."""
    given_up = sorted(
        r.id for r in rows(store, run_id) if (r.last_error or "").startswith(GIVEN_UP)
    )
    records = refusals(cli, run_id)
    assert sorted(r["details"]["outbox_id"] for r in records) == given_up
    return {r["details"]["outbox_id"]: r for r in records}


def counted(kind: str, error: str) -> float:
    labels = {"kind": kind, "error": error}
    return metrics.REGISTRY.get_sample_value("countersign_outbox_given_up_total", labels) or 0.0


def rows(store: Store, run_id: str) -> list[Any]:
    with store.engine.connect() as conn:
        return list(conn.execute(outbox.select().where(outbox.c.run_id == run_id)))


def settled(store: Store, run_id: str) -> list[Any] | None:
    """The run's outbox rows once every one is settled (sent or given up)."""
    found = rows(store, run_id)
    return found if found and all(r.sent_at is not None for r in found) else None


def test_a_run_in_a_channel_the_bot_is_not_in_is_cancelled_and_its_starter_told(
    setup: tuple[Config, Store], cli: Cli
) -> None:
    """The first-day mistake: /crew run in a channel the bot was not invited to. Slack
    answers not_in_channel; the run is not left waiting for a review nobody can see."""
    config, store = setup
    before = counted("run_started", "not_in_channel")
    with slack_and_bot(config, store) as (slack, _bot):
        slack.add_channel(NOBOT, "nobot", [ALICE, BOB], bot_is_member=False)
        slack.slash_command(ALICE, NOBOT, "/crew", "run uninvited topic=otters")
        (run,) = wait_until(store.list_runs, what="the run to start")
        (ack,) = wait_until(lambda: slack.ephemerals(ALICE), what="the ack")
        assert "appears" not in ack.text and "I'll DM you what to do" in ack.text  # honest
        cancelled = wait_until(
            lambda: store.get_run(run.id).status == RunStatus.CANCELLED and store.get_run(run.id),
            what="the run to be cancelled",
        )
        assert "not_in_channel" in (cancelled.error or "")
        told = wait_until(lambda: slack.direct_messages(ALICE), what="a DM to Alice")
        assert "Invite @Countersign to <#C0NOBOT>" in text_of(told[-1])
        assert "cancelled" in text_of(told[-1])
        done = wait_until(lambda: settled(store, run.id), what="every row of the run settled")
        (root,) = [r for r in done if r.kind == "run_started"]
        assert root.last_error.startswith(GIVEN_UP + "slack: not_in_channel")
        refused = [c for c in slack.calls("chat.postMessage") if c.error == "not_in_channel"]
        assert len(refused) == 1  # not retried
        assert len(told) == 1  # told once, whatever else of the run was given up
        assert store.list_reviews(status=ReviewStatus.PENDING, run_id=run.id) == []
    assert counted("run_started", "not_in_channel") == before + 1
    audited = one_record_per_given_up_step(store, cli, run.id)
    assert audited[root.id]["decided_by"] == "countersign"
    assert audited[root.id]["details"] == {
        "outbox_id": root.id,
        "kind": "run_started",
        "error": "not_in_channel",
        "said": None,
        "cancelled": True,
    }
    assert [r["details"]["cancelled"] for r in audited.values()].count(True) == 1


@ON_SQLITE
def test_a_refused_review_message_is_given_up_and_the_run_goes_on(
    setup: tuple[Config, Store], cli: Cli
) -> None:
    """Slack refuses the first review's message (invalid_blocks): that row is given up, its
    starter told; a reply in the thread still decides it, and the run's later messages go
    out."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):

        def first_review(params: Json) -> bool:
            return "countersign_review" in str(params.get("metadata"))

        slack.fail_next("chat.postMessage", status=200, error="invalid_blocks", where=first_review)
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        told = wait_until(lambda: slack.direct_messages(ALICE), what="a DM to Alice")
        assert "could not be posted in its thread" in text_of(told[-1])
        assert "The run goes on" in text_of(told[-1])
        (run,) = store.list_runs()
        assert store.get_run(run.id).status == RunStatus.WAITING
        assert [m for m in slack.thread(CHANNEL, root["ts"]) if buttons(m)] == []

        slack.reply_in_thread(BOB, CHANNEL, root["ts"], "lgtm")
        article = review_with_buttons(slack, root["ts"])
        slack.click_button(ALICE, CHANNEL, article["ts"], "countersign:approve")
        wait_until(
            lambda: store.get_run(run.id).status == RunStatus.SUCCEEDED, what="the run to succeed"
        )
        wait_until(lambda: settled(store, run.id), what="every row of the run settled")
        refused = [c for c in slack.calls("chat.postMessage") if c.error == "invalid_blocks"]
        assert len(refused) == 1
    (record,) = one_record_per_given_up_step(store, cli, run.id).values()
    (outline, _article) = sorted(store.list_reviews(status=None, run_id=run.id), key=seq_of)
    assert record["review_id"] == outline.id and record["review_kind"] == outline.kind
    assert record["details"]["kind"] == "review_opened"
    assert record["details"]["error"] == "invalid_blocks"
    assert record["details"]["cancelled"] is False


def seq_of(review: Any) -> Any:
    return review.created_at, review.id


@ON_SQLITE
def test_an_archived_channel_and_a_revoked_token_are_not_retried(
    setup: tuple[Config, Store], cli: Cli
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
        root = root_of(slack)
        review_with_buttons(slack, root["ts"])
        slack.archive_channel(CHANNEL)
        (run,) = store.list_runs()
        store.cancel_run(run.id, ALICE)  # its result and the root's update are refused
        wait_until(lambda: settled(store, run.id), what="every row of the run settled")
        refused = {c.error for c in slack.calls() if not c.ok}
        assert refused == {"is_archived"}
        told = wait_until(lambda: slack.direct_messages(ALICE), what="a DM to Alice")
        assert len(told) == 1 and "is archived" in text_of(told[0])

        slack.revoke_token()
        slack.slash_command(BOB, CHANNEL, "/crew", "run writer topic=seals")
        second = wait_until(
            lambda: next((r for r in store.list_runs() if r.id != run.id), None),
            what="the second run",
        )
        done = wait_until(lambda: settled(store, second.id), what="its rows settled")
        (started,) = [r for r in done if r.kind == "run_started"]
        assert started.last_error == GIVEN_UP + "slack: token_revoked"
        assert store.get_run(second.id).status != RunStatus.CANCELLED  # a new token carries on
    first = one_record_per_given_up_step(store, cli, run.id)
    assert first and {r["details"]["error"] for r in first.values()} == {"is_archived"}
    (revoked,) = one_record_per_given_up_step(store, cli, second.id).values()
    assert revoked["details"]["error"] == "token_revoked"
    records = [*first.values(), revoked]
    assert not any(r["details"]["cancelled"] for r in records)  # cancelled by Alice, or not


def test_the_fix_is_named_for_each_refusal() -> None:
    said = refusal_text.refused("writer", "run_1", NOBOT, "not_in_channel", root=True)
    assert "Invite @Countersign to <#C0NOBOT> (type `/invite @Countersign` there)" in said
    assert "start it again" in said
    scope = refusal_text.refused("w", "r", NOBOT, "missing_scope", root=False, needed="im:read")
    assert "`im:read`" in scope and "reinstall" in scope


@ON_SQLITE
def test_a_refused_root_whose_dm_failed_for_a_while_is_recorded_as_cancelling_its_run(
    setup: tuple[Config, Store], cli: Cli
) -> None:
    """The DM about a refused root fails for a while: the row is tried again, the run is
    already cancelled by then, and the one record still says the refusal cancelled it."""
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.add_channel(NOBOT, "nobot", [ALICE, BOB], bot_is_member=False)
        slack.fail_next("conversations.open", status=500, error="internal_error")
        slack.slash_command(ALICE, NOBOT, "/crew", "run uninvited topic=otters")
        (run,) = wait_until(store.list_runs, what="the run to start")
        wait_until(lambda: slack.direct_messages(ALICE), what="a DM to Alice, the second time")
        done = wait_until(lambda: settled(store, run.id), what="every row of the run settled")
        (root,) = [r for r in done if r.kind == "run_started"]
        assert root.attempts == 2  # the first try's DM failed
        assert len([c for c in slack.calls("conversations.open") if not c.ok]) == 1
    audited = one_record_per_given_up_step(store, cli, run.id)
    assert audited[root.id]["details"]["cancelled"] is True
