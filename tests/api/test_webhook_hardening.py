"""Webhooks that settle whatever a receiver answers, and logs that keep a webhook's secrets:
any ``Retry-After`` (NaN, infinite, negative, huge, a date, garbage) is a wait the sender can
keep, one receiver's failure never re-sends the event to another that took it, and a URL's
``user:password@`` is in no log line. On SQLite and PostgreSQL, against real receivers.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from pathlib import Path

import pytest

from bot.webhooks.sender import MOST_RETRY_AFTER, _retry_after
from crew_runtime.config import Config, load_config
from storage import Store
from tests.support.slack_harness import wait_until
from tests.support.webhook_receiver import SECRET, SenderThread, receiving, sending, start

__all__ = ["sending"]  # the fixture, used by name

ODD = {
    "nan": "nan",
    "minus-nan": "-NaN",
    "inf": "inf",
    "minus-inf": "-inf",
    "negative": "-5",
    "huge": "1e400",
    "far-date": "Fri, 31 Dec 9999 23:59:59 GMT",
    "past-date": "Wed, 21 Oct 2015 07:28:00 GMT",
    "garbage": "soon, maybe",
    "bad-date": "Mon, 99 Foo 99999 99:99:99 GMT",
}


def two_webhooks(tmp_path: Path, crew: str, *urls: str) -> Config:
    hooks = ", ".join(
        f'{{url = "{url}", events = ["run.finished"], secret_env = "HOOK_SECRET"}}' for url in urls
    )
    path = tmp_path / "countersign.toml"
    path.write_text(f'[crews.{crew}]\nfactory = "a:b"\nwebhooks = [{hooks}]\n')
    return load_config(path)


@pytest.mark.parametrize("value", list(ODD.values()), ids=list(ODD))
def test_any_retry_after_is_a_wait_from_nothing_to_an_hour_or_none(value: str) -> None:
    wait = _retry_after(value)
    assert wait is None or 0.0 <= wait <= MOST_RETRY_AFTER, wait


@pytest.mark.parametrize("value", list(ODD.values()), ids=list(ODD))
def test_an_odd_retry_after_settles_the_event_and_spares_the_healthy_webhook(
    tmp_path: Path, store: Store, sending: list[SenderThread], value: str
) -> None:
    with (
        receiving(SECRET, [503] * 50, retry_after=value) as sick,
        receiving(SECRET, path="/hook") as healthy,
    ):
        config = two_webhooks(tmp_path, "deal", sick.url, healthy.url)
        run = store.create_run("deal", {})
        store.cancel_run(run.id, by="U0ANA")
        # A short claim: an event left unsettled would be sent again within a second.
        start(sending, store, config, claim=timedelta(seconds=0.5))
        [event] = store.list_webhook_events(run_id=run.id)

        def settled() -> bool:
            [now] = store.list_webhook_events(run_id=run.id)
            return int(now.progress.get(sick.url, {}).get("attempts", 0)) >= 1

        wait_until(settled, 30, "the first attempts recorded")
        [now] = store.list_webhook_events(run_id=run.id)
        sick_state = now.progress[sick.url]
        assert sick_state["state"] == "retry"
        assert time.time() - 5 <= sick_state["next"] <= time.time() + MOST_RETRY_AFTER + 5
        assert now.progress[healthy.url]["state"] == "delivered"
        # However often the sick one is tried again, the healthy one took it once.
        attempts = sick.count(event.id)
        wait_until(
            lambda: sick.count(event.id) > attempts or sick_state["next"] > time.time() + 2,
            30,
            "another attempt at the sick receiver, or a wait that is long",
        )
        assert healthy.count(event.id) == 1


def test_a_webhook_urls_password_is_in_no_log_line(
    tmp_path: Path,
    store: Store,
    sending: list[SenderThread],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with receiving(SECRET, [500, 500, 400], path="/hook") as receiver:
        url = receiver.url.replace("http://", "http://hookuser:s3cr3t-pw@") + "?key=q-s3cr3t"
        down = "http://hookuser:s3cr3t-pw@127.0.0.1:1/hook?key=q-s3cr3t"
        config = two_webhooks(tmp_path, "deal", url, down)
        run = store.create_run("deal", {})
        store.cancel_run(run.id, by="U0ANA")
        start(sending, store, config, max_attempts=3)

        def over() -> bool:
            [event] = store.list_webhook_events(run_id=run.id)
            return {p.get("state") for p in event.progress.values()} <= {"refused", "gave_up"} and (
                len(event.progress) == 2
            )

        wait_until(over, 60, "both webhooks done with")
    assert "not delivered (attempt 1)" in caplog.text
    assert "127.0.0.1" in caplog.text
    for secret in ("s3cr3t-pw", "q-s3cr3t", "hookuser:"):
        assert secret not in caplog.text
    [event] = store.list_webhook_events(run_id=run.id)
    assert all("s3cr3t" not in str(p.get("error")) for p in event.progress.values())
