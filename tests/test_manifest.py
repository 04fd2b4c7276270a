"""manifest.yml is what a person pastes into Slack: check it as Slack would, and against the code.

The limits are those of Slack's manifest schema v1 (slackapi/manifest-schema). The
cross-checks catch drift: a Web API method the bot calls without the scope it needs,
a listener whose events are not subscribed, a command the bot does not handle.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.sandbox.standin import SlackStandIn

ROOT = Path(__file__).resolve().parent.parent

# Web API methods the bot calls → the bot scope each needs (None: no scope needed).
SCOPES: dict[str, set[str] | None] = {
    "chat_postMessage": {"chat:write"},
    "chat_update": {"chat:write"},
    "chat_postEphemeral": {"chat:write"},
    "files_getUploadURLExternal": {"files:write"},
    "files_completeUploadExternal": {"files:write"},
    "files_info": {"files:read"},
    "conversations_members": {"channels:read", "groups:read"},
    "users_info": {"users:read"},
    "conversations_history": {"channels:history", "groups:history", "im:history"},
    "conversations_open": {"im:write"},
    "chat_getPermalink": None,
    "conversations_replies": {"channels:history", "groups:history"},
    "usergroups_users_list": {"usergroups:read"},
    "views_open": None,
    "views_update": None,
    "views_publish": None,
    "auth_test": None,
}
SETTINGS_KEYS = {
    "event_subscriptions",
    "interactivity",
    "org_deploy_enabled",
    "socket_mode_enabled",
    "token_rotation_enabled",
    "allowed_ip_address_ranges",
    "incoming_webhooks",
    "is_hosted",
    "function_runtime",
}


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "manifest.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_within_slack_schema_limits(manifest: dict[str, Any]) -> None:
    info = manifest["display_information"]
    assert 1 <= len(info["name"]) <= 35
    assert len(info["description"]) <= 140
    assert 175 <= len(info["long_description"]) <= 4000
    assert len(manifest["features"]["bot_user"]["display_name"]) <= 80
    for command in manifest["features"]["slash_commands"]:
        assert re.fullmatch(r"/.{1,31}", command["command"])
        assert len(command["description"]) <= 2000
        assert len(command.get("usage_hint", "")) <= 1000
        assert re.match(r"^https?://", command["url"])
    settings = manifest["settings"]
    assert set(settings) <= SETTINGS_KEYS
    assert settings["interactivity"]["is_enabled"] is True
    events = settings["event_subscriptions"]["bot_events"]
    assert len(events) == len(set(events)) <= 100
    for url in (
        settings["event_subscriptions"]["request_url"],
        settings["interactivity"]["request_url"],
        *(c["url"] for c in manifest["features"]["slash_commands"]),
    ):
        assert url.endswith("/slack/events")


def test_commands_and_events_match_the_listeners(manifest: dict[str, Any]) -> None:
    source = (ROOT / "bot" / "slack" / "listeners.py").read_text()
    commands = {c["command"] for c in manifest["features"]["slash_commands"]}
    assert commands == set(re.findall(r'app\.command\("(/[a-z-]+)"\)', source))
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    handled = set(re.findall(r'app\.event\("([a-z_]+)"\)', source))
    assert handled == {"message", "app_mention", "app_home_opened"}
    assert {"app_mention", "app_home_opened", "message.channels", "message.groups"} <= events
    # The Home tab the bot publishes to, and the Messages tab DM reminders arrive in.
    assert manifest["features"]["app_home"] == {
        "home_tab_enabled": True,
        "messages_tab_enabled": True,
    }


def test_every_web_api_call_has_its_scope(manifest: dict[str, Any]) -> None:
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    called: set[str] = set()
    for path in (ROOT / "bot").rglob("*.py"):
        called |= set(re.findall(r"client\.([a-z]+_[A-Za-z_0-9]+)\(", path.read_text()))
    assert "chat_postMessage" in called  # the sources were read, so the checks can fail
    unknown = called - set(SCOPES)
    assert not unknown, f"add the scopes these methods need to SCOPES: {unknown}"
    for method in called:
        needed = SCOPES[method]
        assert needed is None or needed <= scopes, (method, needed)
    assert "commands" in scopes


def test_the_standin_sends_commands_as_the_manifest_asks(manifest: dict[str, Any]) -> None:
    """/crew run reads a reviewer from a mention, which Slack sends only with should_escape;
    the stand-in escapes (or not) as the manifest says, so the tests see what Slack sends."""
    [crew] = manifest["features"]["slash_commands"]
    default = inspect.signature(SlackStandIn).parameters["should_escape"].default
    assert crew["should_escape"] is True and default is True
