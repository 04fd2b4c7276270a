"""Metrics, health and JSON logs: the database's gauges on both backends, the counters where
they are counted, ``/healthz`` with the database down, and ``LOG_FORMAT=json``."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from slack_sdk.errors import SlackApiError
from sqlalchemy.engine import make_url

from bot.cli.main import main
from bot.hosting.metrics import Endpoints, start_site
from bot.hosting.server import Deployment, SlackSettings, slack_client
from bot.log_format import JsonFormatter
from bot.settings import Settings, SettingsError
from crew_runtime import log_fields, metrics
from crew_runtime.config import load_config
from crew_runtime.service import Countersign
from sandbox import StandInThread
from storage import DecisionKind, NewReview, ReviewKind, RunStatus, Store
from storage.inbox import InboxStore, NewRequest
from tests.support.harness import CONFIG, ON_SQLITE, ROOT
from tests.support.slack_harness import (
    ALICE,
    CHANNEL,
    SECRET,
    buttons,
    free_port,
    new_standin,
    text_of,
    wait_until,
)
from tests.support.tcp_proxy import TcpProxy
from tests.support.timing import FakeClock
from tests.support.zygote import Forked, Zygote

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(text: str) -> Samples:
    """Every sample of an exposition, by name and sorted labels, through Prometheus' parser."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def counted(name: str, **labels: str) -> float:
    """A sample of this process's registry (0 if never counted)."""
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def _ask(seq: int) -> NewReview:
    return NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=seq, prompt="draft")


def _pause(store: Store, crew: str) -> str:
    """A run of ``crew`` claimed and suspended at one review; the review's id."""
    store.create_run(crew, {})
    run = store.claim_run("w1", timedelta(seconds=30))
    assert run is not None and run.lease_token is not None
    (review,) = store.suspend_run(run.id, run.lease_token, [_ask(0)])
    return review.id


# --- the database's gauges ---------------------------------------------------------------


def test_the_database_gauges_count_runs_reviews_and_backlogs(db_url: str) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    started = clock.now
    _pause(store, "writer")
    clock.advance(hours=2)
    _pause(store, "writer")
    clock.advance(seconds=1)
    store.create_run("research", {})
    clock.advance(seconds=1)
    store.create_run("writer", {})
    finished = store.claim_run("w1", timedelta(seconds=30))
    assert finished is not None and finished.lease_token is not None
    store.finish_run(finished.id, finished.lease_token, RunStatus.SUCCEEDED, output="done")
    received = clock.now
    InboxStore(store).record([NewRequest("k1", "{}", "application/json")])
    clock.advance(minutes=30)
    unsent = store.due_outbox(limit=1000)

    samples = scrape(metrics.exposition([metrics.database_registry(store)]).decode())

    assert samples[("countersign_database_up", ())] == 1
    runs = {k[1]: v for k, v in samples.items() if k[0] == "countersign_runs"}
    assert len(runs) == 2 * len(RunStatus)  # every status of both crews, zeros included
    assert {labels: count for labels, count in runs.items() if count} == {
        (("crew", "writer"), ("status", "waiting")): 2,
        (("crew", "writer"), ("status", "queued")): 1,
        (("crew", "research"), ("status", "succeeded")): 1,  # claimed: the oldest queued
    }
    pending = {k[1]: v for k, v in samples.items() if k[0] == "countersign_pending_reviews"}
    assert len(pending) == 2 * 4  # every age of both crews
    assert {labels: count for labels, count in pending.items() if count} == {
        (("age", "1h_to_1d"), ("crew", "writer")): 1,  # 2 h 30 min
        (("age", "under_1h"), ("crew", "writer")): 1,  # 30 min
    }
    oldest = ("countersign_oldest_pending_review_seconds", (("crew", "writer"),))
    assert samples[oldest] == (clock.now - started).total_seconds()
    assert samples[("countersign_oldest_pending_review_seconds", (("crew", "research"),))] == 0
    assert samples[("countersign_inbox_backlog", ())] == 1
    assert samples[("countersign_inbox_oldest_seconds", ())] == (clock.now - received).seconds
    assert samples[("countersign_outbox_backlog", ())] == len(unsent) > 0
    outbox_age = (clock.now - min(m.created_at for m in unsent)).total_seconds()
    assert samples[("countersign_outbox_oldest_seconds", ())] == outbox_age
    store.close()


def test_an_unreadable_database_is_reported_down_not_as_zeros(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'missing' / 'countersign.db'}", upgrade=False)
    samples = scrape(metrics.exposition([metrics.database_registry(store)]).decode())
    assert samples == {("countersign_database_up", ()): 0}
    store.close()


# --- what a process counts ---------------------------------------------------------------


@ON_SQLITE
def test_a_decision_is_timed_once_even_when_its_request_is_replayed(
    db_url: str, tmp_path: Path
) -> None:
    clock = FakeClock()
    store = Store.open(db_url, clock=clock)
    review_id = _pause(store, "writer")
    (tmp_path / "c.toml").write_text(CONFIG)
    service = Countersign(store, load_config(tmp_path / "c.toml"))
    labels = {"crew": "writer", "kind": "task_review"}
    count = counted("countersign_time_to_decision_seconds_count", **labels)
    total = counted("countersign_time_to_decision_seconds_sum", **labels)
    clock.advance(seconds=90)
    for _ in range(2):  # the same request twice, as Slack's retry would send it
        service.decide(review_id, DecisionKind.APPROVE, None, by="U1", request_key="req-1")
        clock.advance(seconds=5)
    assert counted("countersign_time_to_decision_seconds_count", **labels) == count + 1
    assert counted("countersign_time_to_decision_seconds_sum", **labels) == total + 90
    store.close()


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ({"status": 200, "error": "channel_not_found"}, "channel_not_found"),
        # a 5xx page is not JSON: no error code, the status says what went wrong
        ({"status": 500, "times": 20}, "http_500"),
    ],
)
def test_failed_slack_calls_are_counted_by_method_and_error(
    fault: dict[str, Any], error: str
) -> None:
    standin = new_standin()
    with StandInThread(standin) as slack:
        settings = SlackSettings(
            bot_token=standin.bot_token, signing_secret="s", app_token=None, api_url=slack.api_url
        )
        labels = {"method": "chat.postMessage", "error": error}
        before = counted("countersign_slack_api_errors_total", **labels)
        slack.fail_next("chat.postMessage", **fault)

        async def post() -> None:
            client = slack_client(settings)
            with pytest.raises(SlackApiError):
                await client.chat_postMessage(channel=CHANNEL, text="hello")

        asyncio.run(post())
    assert counted("countersign_slack_api_errors_total", **labels) == before + 1


# --- /healthz -----------------------------------------------------------------------------


async def _get(port: int, path: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as answer,
    ):
        body = await (answer.json() if path == "/healthz" else answer.text())
        return answer.status, body


async def _health_while(store: Store, cut: Any, restore: Any) -> list[tuple[int, Any]]:
    """``/healthz`` answered with the database up, down (``cut``), then up (``restore``)."""
    runner = await start_site(Endpoints(store, (metrics.REGISTRY,)).app(), "127.0.0.1", 0)
    port = runner.addresses[0][1]
    try:
        answers = [await _get(port, "/healthz")]
        cut()
        answers.append(await _get(port, "/healthz"))
        restore()
        answers.append(await _get(port, "/healthz"))
        return answers
    finally:
        await runner.cleanup()


@pytest.fixture
def reachable(db_url: str) -> Iterator[tuple[Store, Any, Any]]:
    """A store, and how to make its database unreachable and reachable again: PostgreSQL
    through a proxy the test cuts; SQLite whose directory is moved away."""
    url = make_url(db_url)
    if url.get_backend_name() == "postgresql":
        with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
            store = Store.open(proxy.url_through(db_url))
            yield store, proxy.cut, proxy.restore
            store.close()
        return
    directory = Path(url.database or "").parent / "db"
    directory.mkdir()
    store = Store.open(f"sqlite:///{directory / 'countersign.db'}")
    away = directory.with_name("db-away")

    def cut() -> None:
        directory.rename(away)
        store.engine.dispose()  # the connections open on the file keep it, new ones fail

    yield store, cut, lambda: away.rename(directory)
    store.close()


def test_healthz_says_whether_the_database_answers(reachable: tuple[Store, Any, Any]) -> None:
    store, cut, restore = reachable
    up, down, again = asyncio.run(_health_while(store, cut, restore))
    assert up == (200, {"ok": True, "database": "ok"})
    assert down[0] == 503
    assert down[1]["database"] == "unreachable"
    assert again == up


async def _metrics_port_in_socket_mode(store: Store, config_path: Path) -> tuple[Any, str]:
    """serve in Socket Mode (Slack unreachable: it keeps connecting), with --metrics-port:
    its /healthz and /metrics, asked while it connects."""
    port = free_port()
    slack = SlackSettings(
        bot_token="xoxb-unused",
        signing_secret="",
        app_token="xapp-1-unused",
        api_url=f"http://127.0.0.1:{free_port()}/api/",
    )
    deployment = Deployment(
        slack, load_config(config_path), store, workers=0, metrics_at=("127.0.0.1", port)
    )
    stop = asyncio.Event()
    serving = asyncio.create_task(deployment.serve_socket_mode(stop))
    try:
        for _ in range(1200):  # until it listens (a minute at most)
            try:
                status, health = await _get(port, "/healthz")
                break
            except aiohttp.ClientConnectionError:
                assert not serving.done(), serving.result()
                await asyncio.sleep(0.05)
        else:
            raise AssertionError("serve never listened on its metrics port")
        assert status == 200, health
        _, exposed = await _get(port, "/metrics")
        return health, exposed
    finally:
        stop.set()
        await serving


@ON_SQLITE
def test_serve_in_socket_mode_serves_metrics_and_health_on_its_metrics_port(
    store: Store, tmp_path: Path
) -> None:
    (tmp_path / "c.toml").write_text(CONFIG)
    health, exposed = asyncio.run(_metrics_port_in_socket_mode(store, tmp_path / "c.toml"))
    assert health == {"ok": True, "database": "ok", "worker": True}
    samples = scrape(exposed)
    assert samples[("countersign_database_up", ())] == 1
    assert samples[("countersign_outbox_backlog", ())] == 0


# --- logs ---------------------------------------------------------------------------------


def test_a_bad_log_format_is_refused_at_start(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SettingsError, match="LOG_FORMAT: expected one of text, json, got 'xml'"):
        Settings.from_env({"LOG_FORMAT": "xml"})
    assert Settings.from_env({"LOG_FORMAT": " JSON "}).log_format == "json"
    assert main(["worker", "--until-idle"], environ={"LOG_FORMAT": "xml"}) == 2
    assert capsys.readouterr().err == "error: LOG_FORMAT: expected one of text, json, got 'xml'\n"


def test_json_lines_carry_the_run_and_review_and_the_exception() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("countersign.test_json")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        token = log_fields.REVIEW_ID.set("rev_1")
        try:
            logger.warning("two\nlines", extra={"run_id": "run_1"})
            try:
                raise ValueError("boom")
            except ValueError:
                logger.exception("failed")
        finally:
            log_fields.REVIEW_ID.reset(token)
        logger.info("about nothing")
    finally:
        logger.removeHandler(handler)
    first, second, third = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert first["message"] == "two\nlines"
    assert (first["run_id"], first["review_id"], first["level"]) == ("run_1", "rev_1", "WARNING")
    assert "ValueError: boom" in second["exception"]
    assert second["review_id"] == "rev_1" and "run_id" not in second
    assert set(third) == {"time", "level", "logger", "message"}


def test_a_worker_logs_one_json_object_per_line_with_its_runs(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = make_url(db_url)
    if url.get_backend_name() == "postgresql":  # trust auth ignores the password
        db_url = url.set(password="s3cret").render_as_string(hide_password=False)
    config = tmp_path / "countersign.toml"
    config.write_text(CONFIG)
    store = Store.open(db_url)
    service = Countersign(store, load_config(config))
    paused = service.start_run("writer", {"topic": "otters"})
    failing = service.start_run("verbose", {"topic": "otters", "fail": "yes"})
    capsys.readouterr()
    argv = ["--config", str(config), "--database-url", db_url, "worker", "--until-idle"]
    code = main([*argv, "--poll", "0.05"], environ={"LOG_FORMAT": "json"})
    err = capsys.readouterr().err
    assert code == 0, err
    assert "s3cret" not in err  # the database's password (PostgreSQL), logged masked
    lines = [json.loads(line) for line in err.splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    for run in (paused, failing):
        about = [line for line in lines if run.id in line["message"]]
        assert about, lines
        assert all(line.get("run_id") == run.id for line in about), about
    # Logged inside the execution, its run id taken from the context, not from the line.
    (failure,) = [line for line in lines if line["logger"] == "crew_runtime.executor"]
    assert failure["run_id"] == failing.id
    assert store.get_run(failing.id).status == RunStatus.FAILED
    store.close()


# --- a real serve -------------------------------------------------------------------------

SERVE_CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
"""


def _get_text(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        return str(answer.read().decode())


def _healthy(port: int, bot: Forked) -> bool:
    assert bot.poll() is None, bot.communicate()[0]
    try:
        return bool(json.loads(_get_text(port, "/healthz"))["ok"])
    except OSError:
        return False


@pytest.mark.slow
@ON_SQLITE
def test_serve_and_its_worker_expose_what_happened_to_a_run_paused_and_decided(
    tmp_path: Path, db_url: str
) -> None:
    (tmp_path / "countersign.toml").write_text(SERVE_CONFIG)
    llm_log = tmp_path / "llm.jsonl"
    store = Store.open(db_url)
    port, worker_port = free_port(), free_port()
    standin = new_standin(bot_endpoint=f"http://127.0.0.1:{port}/slack/events")
    with StandInThread(standin) as slack:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "DATABASE_URL": db_url,
            "COUNTERSIGN_CONFIG": str(tmp_path / "countersign.toml"),
            "COUNTERSIGN_SCRIPTED_LOG": str(llm_log),
            "SLACK_BOT_TOKEN": standin.bot_token,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": slack.api_url,
            "LOG_FORMAT": "json",
        }
        argv = ["serve", "--port", str(port), "--worker-metrics-port", str(worker_port)]
        # Forked warm, and so its worker child: forked by the fork server serve forks.
        bot = Zygote.fork([*argv, "--lease", "3"], env, tmp_path, tmp_path / "serve.log")
        try:
            wait_until(lambda: _healthy(port, bot), what="serve to answer /healthz")
            slack.slash_command(ALICE, CHANNEL, "/crew", "run writer topic=otters")
            root = wait_until(
                lambda: next((m for m in slack.messages(CHANNEL) if m.get("bot_id")), None),
                what="the root message",
            )
            outline = wait_until(
                lambda: next((m for m in slack.thread(CHANNEL, root["ts"]) if buttons(m)), None),
                what="the outline's review",
            )
            (decided,) = store.list_reviews()
            assert slack.click_button(ALICE, CHANNEL, outline["ts"], "countersign:approve").ok
            wait_until(
                lambda: any(
                    buttons(m) and "Article v0" in text_of(m)
                    for m in slack.thread(CHANNEL, root["ts"])
                ),
                what="the article's review, after a resume",
            )
            # The worker counts an execution once it has ended, after its review is out.
            waiting = ("countersign_executions_total", (("crew", "writer"), ("outcome", "waiting")))
            worker = wait_until(
                lambda: (s := scrape(_get_text(worker_port, "/metrics"))).get(waiting) == 2 and s,
                what="the worker to count both executions",
            )
            served = scrape(_get_text(port, "/metrics"))
            health = json.loads(_get_text(port, "/healthz"))
        finally:
            bot.send_signal(signal.SIGTERM)
            out, _ = bot.communicate(timeout=90)
    assert bot.returncode == 0, out
    store.close()

    assert served[("countersign_database_up", ())] == 1
    assert served[("countersign_runs", (("crew", "writer"), ("status", "waiting")))] == 1
    pending = ("countersign_pending_reviews", (("age", "under_1h"), ("crew", "writer")))
    assert served[pending] == 1
    timed = (("crew", "writer"), ("kind", "task_review"))
    assert served[("countersign_time_to_decision_seconds_count", timed)] == 1
    # The LLM calls are counted where they are made: in the worker process.
    assert not [key for key in served if key[0] == "countersign_llm_calls_total" and served[key]]
    live = worker[("countersign_llm_calls_total", (("crew", "writer"), ("source", "live")))]
    replayed = worker[("countersign_llm_calls_total", (("crew", "writer"), ("source", "replayed")))]
    assert live == len(llm_log.read_text().splitlines())  # every call the model answered
    assert replayed >= 1  # the outline's turns, on resume
    assert worker[("countersign_executions_started_total", (("crew", "writer"),))] == 2
    assert health == {"ok": True, "database": "ok", "worker": True}

    # serve's lines and its worker's, one JSON object each, with no credential in them
    lines = [json.loads(line) for line in out.splitlines()]
    assert standin.bot_token not in out and SECRET not in out
    loggers = {line["logger"] for line in lines}
    assert {"countersign.serve", "countersign.worker"} <= loggers
    (decision,) = [line for line in lines if line["message"].startswith(f"review {decided.id}:")]
    assert (decision["review_id"], decision["run_id"]) == (decided.id, decided.run_id)
