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

from sandbox.scopes import BY_KIND, FIXED, event_subscription, read_manifest, scope_needed
from sandbox.standin import SlackStandIn

ROOT = Path(__file__).resolve().parents[2]

# The kinds of conversation the bot works in: channels, private channels, and the app's DM
# (a run started there by /crew run, reminders by DM). A method whose scope depends on the
# kind (``sandbox.scopes.BY_KIND``) needs its scope for each of them.
USED_KINDS = ("channel", "group", "im")
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


def called_methods() -> set[str]:
    """The Web API methods the bot's code calls (``client.chat_postMessage(`` and the like),
    in Slack's spelling (``chat.postMessage``)."""
    called: set[str] = set()
    for path in (ROOT / "bot").rglob("*.py"):
        if "sandbox" in path.parts:
            continue
        for name in re.findall(r"client\.([a-z]+_[A-Za-z_0-9]+)\(", path.read_text()):
            called.add(name.replace("_", "."))
    return called


def test_every_web_api_call_has_its_scope(manifest: dict[str, Any]) -> None:
    """Each method the bot calls is in the stand-in's table of Slack's scopes, and the
    manifest asks for its scope in every kind of conversation the bot works in: what the
    stand-in grants is what a workspace grants, so a missing one fails here and there."""
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    called = called_methods()
    assert {"chat.postMessage", "conversations.members"} <= called  # the sources were read
    unknown = called - set(FIXED) - set(BY_KIND)
    assert not unknown, f"add the scopes Slack asks of these to sandbox.scopes: {unknown}"
    needed = {(m, scope_needed(m, kind)) for m in called for kind in USED_KINDS}
    missing = {(m, s) for m, s in needed if s is not None and s not in scopes}
    assert not missing, missing
    assert "commands" in scopes


def test_every_event_listened_to_is_subscribed_with_its_scope(manifest: dict[str, Any]) -> None:
    """A message event is sent for each kind of conversation the bot reads replies in, and
    Slack subscribes an app to a message event only with that kind's history scope."""
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    for kind in USED_KINDS:
        event = {"type": "message", "channel_type": kind}
        assert event_subscription(event) in events, kind
        assert scope_needed("conversations.history", kind) in scopes, kind
    assert "app_mentions:read" in scopes


def test_the_standin_reads_the_manifest_as_yaml_does(manifest: dict[str, Any]) -> None:
    grants = read_manifest(ROOT / "manifest.yml")
    assert grants.scopes == set(manifest["oauth_config"]["scopes"]["bot"])
    assert grants.events == set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert SlackStandIn(signing_secret="s").grants == grants


def test_the_standin_sends_commands_as_the_manifest_asks(manifest: dict[str, Any]) -> None:
    """/crew run reads a reviewer from a mention, which Slack sends only with should_escape;
    the stand-in escapes (or not) as the manifest says, so the tests see what Slack sends."""
    [crew] = manifest["features"]["slash_commands"]
    default = inspect.signature(SlackStandIn).parameters["should_escape"].default
    assert crew["should_escape"] is True and default is True
