"""Webhooks delivered at least once, signed, through a receiver's failures, on SQLite and
PostgreSQL: the sender (``bot.webhooks``) against a real local receiver
(``tests/support/webhook_receiver.py``) that checks signatures with the snippet of
docs/guide/webhooks.md.

The events come from the Store's own transitions (a run that waits, a decision, a run that
ends), no Slack involved: a crew without a channel, or a deployment without Slack, still
tells its webhooks.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from crew_runtime import metrics
from crew_runtime.config import Config, load_config
from storage import (
    DecisionKind,
    LeaseLost,
    NewDecision,
    NewReview,
    ReviewKind,
    RunStatus,
    Store,
    WebhookEventType,
)
from tests.support.slack_harness import wait_until
from tests.support.webhook_receiver import (
    HANG,
    SECRET,
    Receiver,
    SenderThread,
    receiving,
    sending,
    start,
)

__all__ = ["sending"]  # the fixture, used by name

LEASE = timedelta(minutes=5)
EVERY = '["run.waiting", "run.finished", "review.decided"]'


def configured(tmp_path: Path, *hooks: tuple[str, str, str]) -> Config:
    """A configuration whose crews (name, url, events) each have one webhook."""
    text = ""
    for crew, url, events in hooks:
        text += (
            f'[crews.{crew}]\nfactory = "a:b"\n'
            f'webhooks = [{{url = "{url}", events = {events}, secret_env = "HOOK_SECRET"}}]\n'
        )
    path = tmp_path / "countersign.toml"
    path.write_text(text)
    return load_config(path)


def lifecycle(store: Store, crew: str) -> str:
    """A run that waits for a review, is approved and succeeds: one event of each type."""
    store.create_run(crew, {"topic": "otters"})  # no channel: no Slack at all
    claimed = store.claim_run("w1", LEASE, exclude=())
    assert claimed is not None and claimed.lease_token
    ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="A draft")
    [review] = store.suspend_run(claimed.id, claimed.lease_token, [ask])
    store.decide(review.id, NewDecision(DecisionKind.APPROVE, "U0ANA"))
    again = store.claim_run("w1", LEASE)
    assert again is not None and again.lease_token
    store.finish_run(again.id, again.lease_token, RunStatus.SUCCEEDED, output="Otters, written")
    return claimed.id


def test_every_event_arrives_signed_with_its_data(
    tmp_path: Path, store: Store, sending: list[SenderThread]
) -> None:
    with receiving(SECRET) as receiver:
        config = configured(tmp_path, ("deal", receiver.url, EVERY))
        run_id = lifecycle(store, "deal")
        start(sending, store, config)

        events = store.list_webhook_events(run_id=run_id)
        assert [e.type for e in events] == [
            WebhookEventType.RUN_WAITING,
            WebhookEventType.REVIEW_DECIDED,
            WebhookEventType.RUN_FINISHED,
        ]
        wait_until(lambda: receiver.ids() == {e.id for e in events}, 60, "every event")

    by_type = {body[0]["type"]: body[0] for body in receiver.delivered.values()}
    waiting = by_type["run.waiting"]["data"]["run"]
    assert (waiting["id"], waiting["crew"]) == (run_id, "deal")
    assert [r["prompt"] for r in waiting["reviews"]] == ["A draft"]
    decided = by_type["review.decided"]["data"]
    assert decided["review"]["decision"]["kind"] == "approve"
    assert decided["review"]["decision"]["by"] == "U0ANA"
    assert decided["run"]["id"] == run_id
    finished = by_type["run.finished"]["data"]["run"]
    assert (finished["status"], finished["output"]) == ("succeeded", "Otters, written")
    assert all(e["created_at"].endswith("Z") for e in by_type.values())
    assert receiver.forged == 0
    assert {h["Content-Type"] for h in receiver.headers} == {"application/json"}


def test_failures_are_retried_until_each_event_arrives_with_the_same_id_and_body(
    tmp_path: Path, store: Store, sending: list[SenderThread]
) -> None:
    """Connection refused (the receiver is down), then a 500, a 429, no answer in time and a
    503: every event still arrives, each attempt carrying the id and the body of the first."""
    with receiving(SECRET, [500, 429, HANG, 503], listen=False) as receiver:
        config = configured(tmp_path, ("deal", receiver.url, EVERY))
        start(sending, store, config, timeout=timedelta(seconds=1))
        run_id = lifecycle(store, "deal")
        ids = {e.id for e in store.list_webhook_events(run_id=run_id)}

        def refused() -> bool:
            tried = [e.progress for e in store.list_webhook_events(run_id=run_id)]
            return len(tried) == 3 and all(
                "Connect" in p.get(receiver.url, {}).get("error", "") for p in tried
            )

        wait_until(refused, 60, "attempts refused while the receiver is down")
        receiver.listen()
        wait_until(lambda: receiver.ids() == ids, 120, "every event, at least once")
        receiver.release()
        wait_until(
            lambda: (
                store.due_webhook_events() == []
                and all(
                    e.progress[receiver.url]["state"] == "delivered"
                    for e in store.list_webhook_events(run_id=run_id)
                )
            ),
            60,
            "every delivery recorded",
        )

    for event_id in ids:
        assert receiver.count(event_id) >= 5, "four failures answered, then a success"
        assert len(receiver.bodies[event_id]) == 1, "a retry sends the same bytes"
    assert receiver.forged == 0
    for event in store.list_webhook_events(run_id=run_id):
        state = event.progress[receiver.url]
        assert state["state"] == "delivered" and state["attempts"] >= 6


def test_a_refusal_is_not_retried(
    tmp_path: Path, store: Store, sending: list[SenderThread], caplog: pytest.LogCaptureFixture
) -> None:
    with receiving(SECRET, [400, 400, 400, 400]) as receiver:
        config = configured(tmp_path, ("deal", receiver.url, '["run.finished"]'))
        run = store.create_run("deal", {})
        store.cancel_run(run.id, by="U0ANA")
        start(sending, store, config)
        [event] = store.list_webhook_events(run_id=run.id)
        wait_until(lambda: _state(store, run.id, receiver) == "refused", 60, "a refusal")

    assert receiver.count(event.id) == 1 and receiver.ids() == set()
    assert "HTTP 400; not tried again" in caplog.text
    assert "token=abc" not in caplog.text, "a URL's query may hold a token: never logged"


def _state(store: Store, run_id: str, receiver: Receiver) -> str | None:
    """How the delivery of the run's first event to ``receiver`` stands."""
    [event, *_] = store.list_webhook_events(run_id=run_id)
    state = event.progress.get(receiver.url, {}).get("state")
    return None if state is None else str(state)


def test_a_webhook_is_given_up_after_its_attempts(
    tmp_path: Path, store: Store, sending: list[SenderThread], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.webhooks.sender")
    gave_up = {"crew": "deal", "outcome": "gave_up"}
    before = metrics.REGISTRY.get_sample_value("countersign_webhook_deliveries_total", gave_up)
    with receiving(SECRET, [500] * 10) as receiver:
        config = configured(tmp_path, ("deal", receiver.url, '["run.finished"]'))
        run = store.create_run("deal", {})
        store.cancel_run(run.id, by="U0ANA")
        start(sending, store, config, max_attempts=3)
        [event] = store.list_webhook_events(run_id=run.id)
        wait_until(lambda: _state(store, run.id, receiver) == "gave_up", 60, "a give-up")

    assert receiver.count(event.id) == 3
    assert f"gave up on event {event.id} (run.finished) after 3 attempts" in caplog.text
    after = metrics.REGISTRY.get_sample_value("countersign_webhook_deliveries_total", gave_up)
    assert (after or 0) == (before or 0) + 1
    assert SECRET.decode() not in caplog.text


def test_a_slow_receiver_holds_up_nobody_else(
    tmp_path: Path, store: Store, sending: list[SenderThread]
) -> None:
    """One receiver that does not answer: the other crew's webhook is told all the same."""
    with receiving(SECRET, [HANG]) as slow, receiving(SECRET) as fast:
        config = configured(
            tmp_path, ("slow", slow.url, '["run.finished"]'), ("fast", fast.url, '["run.finished"]')
        )
        start(sending, store, config, timeout=timedelta(minutes=5))
        for crew in ("slow", "fast", "slow", "fast"):
            store.cancel_run(store.create_run(crew, {}).id, by="U0ANA")
        wait_until(lambda: len(slow.attempts) == 2, 60, "the slow receiver's two requests")
        wait_until(lambda: len(fast.ids()) == 2, 60, "the fast receiver told while slow hangs")
        slow.release()
        wait_until(lambda: len(slow.ids()) == 2, 60, "the slow receiver's events")


def test_events_of_a_crew_without_webhooks_are_closed_unsent(
    tmp_path: Path, store: Store, sending: list[SenderThread]
) -> None:
    with receiving(SECRET) as receiver:
        config = configured(tmp_path, ("deal", receiver.url, '["run.finished"]'))
        store.cancel_run(store.create_run("other", {}).id, by="U0ANA")  # no webhook
        deal = store.create_run("deal", {})
        waiting = store.claim_run("w1", LEASE)
        assert waiting is not None and waiting.lease_token
        ask = NewReview(kind=ReviewKind.QUESTION, stream="task0:Writer", seq=0, prompt="Why?")
        store.suspend_run(waiting.id, waiting.lease_token, [ask])  # run.waiting: not wanted
        store.cancel_run(deal.id, by="U0ANA")
        start(sending, store, config)
        wait_until(lambda: len(receiver.ids()) == 1, 60, "the one event a webhook wants")
        wait_until(
            lambda: all(e.done_at for e in store.list_webhook_events()), 60, "the others closed"
        )

    [told] = receiver.ids()
    assert [e.type for e in store.list_webhook_events() if e.id == told] == [
        WebhookEventType.RUN_FINISHED
    ]


def test_two_senders_deliver_each_event_once_when_nothing_fails(
    tmp_path: Path, db_url: str, store: Store, sending: list[SenderThread]
) -> None:
    """Two replicas' senders on one database: each event is claimed by one of them."""
    with receiving(SECRET) as receiver:
        config = configured(tmp_path, ("deal", receiver.url, '["run.finished"]'))
        other = Store.open(db_url, upgrade=False)
        try:
            runs = [store.create_run("deal", {}) for _ in range(20)]
            start(sending, store, config)
            start(sending, other, config)
            for run in runs:
                store.cancel_run(run.id, by="U0ANA")
            wait_until(lambda: len(receiver.ids()) == 20, 60, "every event")
            for sender in sending:
                sender.stop()
            sending.clear()
        finally:
            other.close()

    assert sorted(receiver.attempts.values()) == [1] * 20


def test_a_sender_that_died_mid_delivery_is_taken_over(
    tmp_path: Path, store: Store, sending: list[SenderThread]
) -> None:
    """A sender stops while its POST hangs (its claim left behind, as a killed process's);
    another sends the event once that claim runs out, with the same id and body."""
    with receiving(SECRET, [HANG]) as receiver:
        config = configured(tmp_path, ("deal", receiver.url, '["run.finished"]'))
        first = SenderThread(
            store, config, claim=timedelta(seconds=1), timeout=timedelta(minutes=5)
        )
        run = store.create_run("deal", {})
        store.cancel_run(run.id, by="U0ANA")
        [event] = store.list_webhook_events(run_id=run.id)
        wait_until(lambda: receiver.count(event.id) == 1, 60, "the first attempt, hanging")
        first.die()
        start(sending, store, config)
        wait_until(lambda: receiver.ids() == {event.id}, 60, "the event sent again")
        receiver.release()

    assert receiver.count(event.id) == 2
    assert len(receiver.bodies[event.id]) == 1


def test_a_change_that_rolls_back_makes_no_event(store: Store) -> None:
    run = store.create_run("deal", {})
    claimed = store.claim_run("w1", LEASE)
    assert claimed is not None
    with pytest.raises(LeaseLost):
        store.finish_run(run.id, "not-the-token", RunStatus.SUCCEEDED, output="x")
    assert store.list_webhook_events(run_id=run.id) == []


def test_a_webhook_dropped_from_the_file_holds_its_events_back_no_more(
    tmp_path: Path, store: Store, sending: list[SenderThread]
) -> None:
    with receiving(SECRET, [500] * 100) as dropped, receiving(SECRET) as kept:
        run = store.create_run("deal", {})
        store.cancel_run(run.id, by="U0ANA")
        [event] = store.list_webhook_events(run_id=run.id)
        first = SenderThread(store, configured(tmp_path, ("deal", dropped.url, EVERY)))
        wait_until(lambda: dropped.count(event.id) >= 1, 60, "an attempt, failed")
        first.stop()
        start(sending, store, configured(tmp_path, ("deal", kept.url, EVERY)))
        wait_until(lambda: kept.ids() == {event.id}, 60, "the webhook kept")
        wait_until(lambda: store.list_webhook_events()[0].done_at, 60, "the event done")
        assert _state(store, run.id, dropped) == "retry", "its record stays"
