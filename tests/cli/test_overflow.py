"""Dates and durations too large for a datetime are refused where they are given, the
largest accepted value named: ``reviewers away --until``, ``/crew away --until`` (which got
no reply at all), a configuration's durations (``expire_after = "3000000d"`` was accepted,
then failed every run at its first review) and ``--lease``/``--poll``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crew_runtime.config import Config, ConfigError, load_config
from storage import Store
from tests.support.cli import Cli, assert_refused, cli
from tests.support.slack_harness import BOB, CHANNEL, MALLORY, answer_to, slack_and_bot

__all__ = ["cli"]  # the fixture, used by name


@pytest.mark.parametrize("until", ["9999-12-31", "9999-12-31T23:59", "9999-12-31T20:00-05:00"])
def test_reviewers_away_until_the_end_of_time_is_one_error_line(cli: Cli, until: str) -> None:
    away = ("reviewers", "away", "U0ANA", "--to", "U0BEN", "--until", until)
    assert_refused(cli(*away), "too far ahead", "9999-12-30")


def test_the_latest_day_named_is_accepted(cli: Cli) -> None:
    cli.ok("reviewers", "away", "U0ANA", "--to", "U0BEN", "--until", "9999-12-30")
    assert "until 9999-12-31" in cli.ok("reviewers", "list").out


@pytest.mark.parametrize("option", ["--lease", "--poll"])
@pytest.mark.parametrize("value", ["inf", "1e300", "86401"])
def test_seconds_too_many_for_a_timedelta_are_refused(cli: Cli, option: str, value: str) -> None:
    result = cli("worker", "--until-idle", option, value)
    assert result.code == 2 and "up to 86400" in result.err and "Traceback" not in result.err


@pytest.mark.parametrize(
    "value", ['"3000000d"', '"36501d"', '"101y"', "99999999999", '"99999999999999999999d"']
)
@pytest.mark.parametrize("key", ["expire_after", "remind_after", "keep_runs"])
def test_a_configuration_duration_too_long_is_refused_as_the_file_loads(
    tmp_path: Path, key: str, value: str
) -> None:
    path = tmp_path / "countersign.toml"
    path.write_text(f'[crews.deal]\nfactory = "tests.support.crews:writer"\n{key} = {value}\n')
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    said = str(refused.value)
    assert f"crews.deal.{key}" in said and "longer than the longest" in said
    assert '"100y" (36500d)' in said


def test_the_longest_duration_named_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "countersign.toml"
    path.write_text('[crews.deal]\nfactory = "tests.support.crews:writer"\nexpire_after = "100y"\n')
    assert load_config(path).crews["deal"].key == "crews.deal"


SLACK_CONFIG = f"""
[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{BOB}"]
"""

pytestmark = pytest.mark.bot_config(SLACK_CONFIG)


def test_crew_away_until_the_end_of_time_gets_a_reply(setup: tuple[Config, Store]) -> None:
    config, store = setup
    with slack_and_bot(config, store, workers=0) as (slack, _bot):
        told = answer_to(slack, BOB, "away --until 9999-12-31 --to @mallory")
        assert "too far ahead" in told and "9999-12-30" in told, told
        assert store.active_delegations() == []
        told = answer_to(slack, BOB, "away --until 9999-12-30 --to @mallory")
        assert MALLORY in told, told
