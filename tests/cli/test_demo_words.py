"""What `countersign demo` tells a newcomer before any run: its --help agrees with itself
(the demo's own defaults, every option explained), the HTTP API sits on a port that does not
change from start to start, and the sandbox's welcome starts one of the configured crews,
yours or the examples'."""

from __future__ import annotations

import pytest

from bot.cli.demo import demo_bot_port
from bot.cli.main import build_parser
from bot.slack.text import demo_welcome


def demo_help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_the_demos_help_gives_its_own_defaults_as_its_epilog_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = demo_help(capsys)
    assert "else examples/countersign.toml" in shown and "else ./countersign.toml" not in shown
    assert "else demo.db in --state-dir" in shown and "sqlite:///countersign.db" not in shown
    assert "--workers N runs executed at once (default: 2)" in shown
    assert "(default: --port + 1, so 8001" in shown and "/api/v1/" in shown


def test_every_demo_option_says_what_it_is() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "==SUPPRESS==" or a.choices)
    demo = sub.choices["demo"]  # type: ignore[index]
    silent = [a.option_strings for a in demo._actions if a.option_strings and not a.help]
    assert silent == []


def test_the_bot_and_its_api_sit_next_to_the_page_unless_told() -> None:
    assert demo_bot_port(8000, None) == 8001  # make demo: the same port at every start
    assert demo_bot_port(8080, None) == 8081
    assert demo_bot_port(0, None) == 0  # any free port, as the page's
    assert demo_bot_port(8000, 9000) == 9000


def test_the_welcome_starts_the_configured_crew_with_its_inputs() -> None:
    assert "Try `/crew run writer topic=otters`" in demo_welcome("writer", ["topic"])
    own = demo_welcome("my_project", ["topic", "current_year"])
    assert "Try `/crew run my_project topic=otters current_year=…`" in own
    assert "writer" not in own
    assert "no crew yet" in demo_welcome(None, [])
