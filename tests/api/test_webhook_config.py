"""A crew's ``webhooks``: validated key by key, their secrets read from the environment at
start, never from the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from crew_runtime.config import ConfigError, load_config
from crew_runtime.specs import WebhookSpec
from crew_runtime.webhooks import webhook_secrets
from storage import WebhookEventType

CREW = "[crews.deal]\nfactory = 'a:b'\n"
HOOK = "url = 'https://example.com/hook', events = ['run.finished'], secret_env = 'DEAL_SECRET'"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "countersign.toml"
    path.write_text(text)
    return path


def error_for(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value).removeprefix(f"{path}: ")


def test_webhooks_load_into_the_crews_spec(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            CREW + "webhooks = [\n"
            "  {url = 'https://example.com/a', events = ['run.waiting', 'review.decided'],"
            " secret_env = 'A_SECRET'},\n"
            f"  {{{HOOK.replace('example.com/hook', 'example.com/b')}}},\n]\n",
        )
    )
    assert config.get("deal").webhooks == (
        WebhookSpec(
            "https://example.com/a",
            (WebhookEventType.RUN_WAITING, WebhookEventType.REVIEW_DECIDED),
            "A_SECRET",
        ),
        WebhookSpec("https://example.com/b", (WebhookEventType.RUN_FINISHED,), "DEAL_SECRET"),
    )


@pytest.mark.parametrize(
    ("webhooks", "expected"),
    [
        (
            "'https://x'",
            'crews.deal.webhooks: expected a list like [{url = "https://…", ...}], got "https://x"',
        ),
        (
            "['https://x']",
            'crews.deal.webhooks[0]: expected a table {url = ..., events = [...]}, got "https://x"',
        ),
        (
            "[{url = 'https://x', events = ['run.finished'], secret = 'hunter2'}]",
            "crews.deal.webhooks[0].secret: a secret does not belong in the file: put it in an "
            'environment variable and name that with secret_env = "MY_WEBHOOK_SECRET"',
        ),
        (
            "[{url = 'https://x', events = ['run.finished']}]",
            "crews.deal.webhooks[0].secret_env: missing; every webhook needs url, events, "
            "secret_env",
        ),
        (
            "[{url = 'https://x', events = ['run.finished'], secret_env = 'S', retries = 3}]",
            "crews.deal.webhooks[0].retries: unknown key; known keys: url, events, secret_env",
        ),
        (
            "[{url = 'ftp://x/y', events = ['run.finished'], secret_env = 'S'}]",
            'crews.deal.webhooks[0].url: expected a URL like "https://example.com/hook", '
            'got "ftp://x/y"',
        ),
        (
            "[{url = 'https://x', events = [], secret_env = 'S'}]",
            "crews.deal.webhooks[0].events: expected a list of some of run.waiting, "
            "run.finished, review.decided, got []",
        ),
        (
            "[{url = 'https://x', events = ['run.started'], secret_env = 'S'}]",
            "crews.deal.webhooks[0].events[0]: expected one of run.waiting, run.finished, "
            'review.decided, got "run.started"',
        ),
        (
            "[{url = 'https://x', events = ['run.finished', 'run.finished'], secret_env = 'S'}]",
            'crews.deal.webhooks[0].events[1]: "run.finished" is listed twice',
        ),
        (
            "[{url = 'https://x', events = ['run.finished'], secret_env = 'hunter 2'}]",
            "crews.deal.webhooks[0].secret_env: expected the name of an environment variable "
            'like "DEAL_WEBHOOK_SECRET", got "hunter 2"',
        ),
        (
            f"[{{{HOOK}}}, {{{HOOK}}}]",
            'crews.deal.webhooks[1].url: "https://example.com/hook" is listed twice',
        ),
    ],
)
def test_each_error_names_the_crew_and_the_key(
    tmp_path: Path, webhooks: str, expected: str
) -> None:
    assert error_for(tmp_path, CREW + f"webhooks = {webhooks}\n") == expected


def test_secrets_come_from_the_environment(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, CREW + f"webhooks = [{{{HOOK}}}]\n"))
    assert webhook_secrets(config, {"DEAL_SECRET": "s3cret"}) == {"DEAL_SECRET": b"s3cret"}


@pytest.mark.parametrize("environ", [{}, {"DEAL_SECRET": ""}])
def test_a_missing_secret_names_the_crew_and_the_variable(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    path = write(tmp_path, CREW + f"webhooks = [{{{HOOK}}}]\n")
    with pytest.raises(ConfigError) as caught:
        webhook_secrets(load_config(path), environ)
    assert str(caught.value) == (
        f"{path}: crews.deal.webhooks[0].secret_env: the environment variable DEAL_SECRET is "
        "not set (or empty); set it to the webhook's secret"
    )
