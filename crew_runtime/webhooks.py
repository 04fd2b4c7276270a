"""A crew's ``webhooks`` in the configuration file: validated (:func:`parse_webhooks`, called by
``crew_runtime.config_checks``) and their secrets read from the environment
(:func:`webhook_secrets`, by ``serve`` as it starts).

The file names the environment variable holding a webhook's secret (``secret_env``), never
the secret: a configuration file is shared and committed, a secret is not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from crew_runtime.config_values import check_keys
from crew_runtime.specs import Config, ConfigError, WebhookSpec
from storage.webhooks import WebhookEventType

KEYS = ("url", "events", "secret_env")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EVENTS = tuple(kind.value for kind in WebhookEventType)

Complain = Callable[[str, str], ConfigError]
"""Makes the error of a dotted key: ``complain(key, problem)``."""


def parse_webhooks(value: object, key: str, complain: Complain) -> tuple[WebhookSpec, ...]:
    """A crew's ``webhooks = [{url = "…", events = [...], secret_env = "…"}]``, ``key`` being
    ``crews.NAME.webhooks``.

    Raises:
        ConfigError: a webhook is not a table, misses a key, has one it should not (a
            ``secret`` in clear among them) or a wrong value; the message names the key.
    """
    if not isinstance(value, list):
        raise complain(
            key, f'expected a list like [{{url = "https://…", ...}}], got {_show(value)}'
        )
    found: list[WebhookSpec] = []
    for i, table in enumerate(value):
        where = f"{key}[{i}]"
        if not isinstance(table, dict):
            raise complain(
                where, f"expected a table {{url = ..., events = [...]}}, got {_show(table)}"
            )
        found.append(_webhook(table, where, complain))
        if found[-1].url in (earlier.url for earlier in found[:-1]):
            raise complain(f"{where}.url", f"{_show(found[-1].url)} is listed twice")
    return tuple(found)


def _webhook(table: dict[str, Any], where: str, complain: Complain) -> WebhookSpec:
    for name in table:
        if name == "secret":
            raise complain(
                f"{where}.secret",
                "a secret does not belong in the file: put it in an environment variable "
                'and name that with secret_env = "MY_WEBHOOK_SECRET"',
            )
    check_keys(table, KEYS, where, complain)
    for name in KEYS:
        if name not in table:
            raise complain(f"{where}.{name}", "missing; every webhook needs " + ", ".join(KEYS))
    url = table["url"]
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise complain(
            f"{where}.url", f'expected a URL like "https://example.com/hook", got {_show(url)}'
        )
    events = table["events"]
    if not isinstance(events, list) or not events:
        raise complain(
            f"{where}.events",
            f"expected a list of some of {', '.join(_EVENTS)}, got {_show(events)}",
        )
    for n, event in enumerate(events):
        if event not in _EVENTS:
            raise complain(
                f"{where}.events[{n}]", f"expected one of {', '.join(_EVENTS)}, got {_show(event)}"
            )
        if event in events[:n]:
            raise complain(f"{where}.events[{n}]", f"{_show(event)} is listed twice")
    secret_env = table["secret_env"]
    if not isinstance(secret_env, str) or not _ENV_NAME_RE.fullmatch(secret_env):
        raise complain(
            f"{where}.secret_env",
            'expected the name of an environment variable like "DEAL_WEBHOOK_SECRET", '
            f"got {_show(secret_env)}",
        )
    return WebhookSpec(
        url=url,
        events=tuple(WebhookEventType(event) for event in events),
        secret_env=secret_env,
    )


def webhook_secrets(config: Config, environ: Mapping[str, str]) -> dict[str, bytes]:
    """The secret of every webhook of ``config``, by the name of its variable in ``environ``.

    Raises:
        ConfigError: a variable is unset or empty; the message names the crew's key and the
            variable, never a value.
    """
    found: dict[str, bytes] = {}
    for spec in config.crews.values():
        for i, webhook in enumerate(spec.webhooks):
            secret = environ.get(webhook.secret_env, "")
            if not secret:
                raise ConfigError(
                    f"{config.path}: {spec.key}.webhooks[{i}].secret_env: the environment "
                    f"variable {webhook.secret_env} is not set (or empty); set it to the "
                    "webhook's secret"
                )
            found[webhook.secret_env] = secret.encode()
    return found


def _show(value: object) -> str:
    """A TOML value of a webhook's table as written (strings quoted), for error messages."""
    if isinstance(value, dict):
        return "a table"
    return json.dumps(value, ensure_ascii=False)
