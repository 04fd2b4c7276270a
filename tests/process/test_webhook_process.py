"""``countersign serve`` as a real process and its webhooks: killed while a POST hangs, the
next one delivers the event (same id, same body); a webhook's secret missing from the
environment stops it at start."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bot.cli.main import main
from sandbox import StandInThread
from storage import Store
from tests.support.processes import bot_env
from tests.support.processes import serve as _serve
from tests.support.slack_harness import free_port, new_standin, wait_until
from tests.support.webhook_receiver import HANG, receiving

SECRET = b"whsec-process-test"


def config(url: str) -> str:
    return (
        '[crews.deal]\nfactory = "tests.support.crews:writer"\n'
        f'webhooks = [{{url = "{url}", events = ["run.finished"], secret_env = "DEAL_SECRET"}}]\n'
    )


@pytest.mark.slow
def test_serve_killed_mid_delivery_delivers_after_restart(tmp_path: Path, db_url: str) -> None:
    store = Store.open(db_url)
    port = free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    with receiving(SECRET, [HANG]) as receiver, StandInThread(standin) as slack:
        (tmp_path / "countersign.toml").write_text(config(receiver.url))
        env = bot_env(tmp_path, db_url, standin.bot_token, slack.api_url)
        env["DEAL_SECRET"] = SECRET.decode()
        first = _serve(env, port)
        try:
            run = store.create_run("deal", {"topic": "otters"})  # no channel, no Slack post
            store.cancel_run(run.id, by="U0ANA")
            [event] = store.list_webhook_events(run_id=run.id)
            wait_until(lambda: receiver.count(event.id) == 1, 60, "the first POST, hanging")
        finally:
            os.kill(first.pid, signal.SIGKILL)
            first.communicate(timeout=30)

        second = _serve(env, port)
        try:
            wait_until(lambda: receiver.ids() == {event.id}, 120, "the event after the restart")
            wait_until(
                lambda: (
                    store.due_webhook_events() == []
                    and store.list_webhook_events(run_id=run.id)[0].progress
                ),
                60,
                "the delivery recorded",
            )
        finally:
            second.terminate()
            second.communicate(timeout=60)
        receiver.release()

    assert receiver.count(event.id) == 2
    assert len(receiver.bodies[event.id]) == 1, "the same body, signed again"
    assert receiver.forged == 0
    [done] = store.list_webhook_events(run_id=run.id)
    assert done.progress[receiver.url]["state"] == "delivered"
    store.close()


def test_serve_refuses_to_start_without_a_webhooks_secret(
    tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "countersign.toml"
    path.write_text(config("https://example.com/hook"))
    environ = {
        "DATABASE_URL": db_url,
        "COUNTERSIGN_CONFIG": str(path),
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-secret",
    }
    assert main(["serve", "--workers", "0", "--port", str(free_port())], environ) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"error: {path}: crews.deal.webhooks[0].secret_env: the environment variable "
        "DEAL_SECRET is not set (or empty); set it to the webhook's secret\n"
    )
