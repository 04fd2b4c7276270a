"""The ``/crew`` grammar: what people type in Slack (smart quotes, escaped ``&<>``, NBSPs)
parses to typed commands, and anything else is a ``CommandError`` that says how to do it,
never another exception."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack import commands, mrkdwn, text
from bot.slack.commands import (
    USAGE,
    CancelCommand,
    CommandError,
    HelpCommand,
    ListCommand,
    PendingCommand,
    RunCommand,
    StatusCommand,
    format_run,
    parse_command,
)
from bot.slack.mrkdwn import escape
from sandbox.payloads import escape_command
from sandbox.workspace import Workspace

FAST = settings(deadline=None, max_examples=200)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("", HelpCommand()),
        ("   ", HelpCommand()),
        ("help", HelpCommand()),
        ("HELP me please", HelpCommand()),
        ("list", ListCommand()),
        ("List", ListCommand()),
        ("pending", PendingCommand()),
        ("status run_0a1b2c", StatusCommand("run_0a1b2c")),
        ("status `run_0a1b2c`", StatusCommand("run_0a1b2c")),
        ("cancel  run_0a1b2c ", CancelCommand("run_0a1b2c")),
        ("run blog", RunCommand("blog", {})),
        ("Run Blog", RunCommand("blog", {})),
        ("run blog topic=agents", RunCommand("blog", {"topic": "agents"})),
        ('run blog topic="durable agents"', RunCommand("blog", {"topic": "durable agents"})),
        ("run blog topic='durable agents'", RunCommand("blog", {"topic": "durable agents"})),
        ("run blog topic=“durable agents”", RunCommand("blog", {"topic": "durable agents"})),
        ("run blog t=\u2018don\u2019t stop\u2019", RunCommand("blog", {"t": "don\u2019t stop"})),
        ("run blog t=don\u2019t", RunCommand("blog", {"t": "don\u2019t"})),
        ("run blog q=a=b==c", RunCommand("blog", {"q": "a=b==c"})),
        ('run blog q="x=1 y=2"', RunCommand("blog", {"q": "x=1 y=2"})),
        ('run blog q="say \\"hi\\""', RunCommand("blog", {"q": 'say "hi"'})),
        ('run blog q="C:\\temp"', RunCommand("blog", {"q": "C:\\temp"})),
        ('run blog q="a\\\\"', RunCommand("blog", {"q": "a\\"})),
        ('run blog q=""', RunCommand("blog", {"q": ""})),
        ("run blog q=", RunCommand("blog", {"q": ""})),
        ('run blog q="a"b"', RunCommand("blog", {"q": 'a"b'})),
        ("run blog q=&lt;b&gt; r=a&amp;b", RunCommand("blog", {"q": "<b>", "r": "a&b"})),
        ("run blog q=&amp;lt;", RunCommand("blog", {"q": "&lt;"})),
        ("run\u00a0blog\u00a0a=1\u00a0b=2", RunCommand("blog", {"a": "1", "b": "2"})),
        ("run my-crew_2 _k=v K2=w", RunCommand("my-crew_2", {"_k": "v", "K2": "w"})),
    ],
)
def test_parses(typed: str, expected: commands.Command) -> None:
    assert parse_command(typed) == expected


@pytest.mark.parametrize(
    ("typed", "says", "usage"),
    [
        ("frobnicate", "`frobnicate`", "/crew run"),
        ("run", "Which crew", text.USAGE_RUN),
        ("run Blog!", "is not valid: use lowercase letters", text.USAGE_RUN),
        ("run -blog", "is not valid: use lowercase letters", text.USAGE_RUN),
        ("run blog topic", "Give each input as `key=value`: `topic` is not one.", text.USAGE_RUN),
        ("run blog =x", "is not valid: use letters, digits and `_`", text.USAGE_RUN),
        ("run blog 1a=x", "is not valid: use letters, digits and `_`", text.USAGE_RUN),
        ("run blog a-b=x", "is not valid: use letters, digits and `_`", text.USAGE_RUN),
        ("run blog a=1 a=2", "given twice", text.USAGE_RUN),
        ('run blog a="open', "no closing quote", text.USAGE_RUN),
        ("run blog a=“open", "no closing quote", text.USAGE_RUN),
        ('run blog a="ends \\"', "no closing quote", text.USAGE_RUN),
        ("status", "Which run", text.USAGE_STATUS),
        ("cancel", "Which run", text.USAGE_CANCEL),
        ("status run_1 run_2", "not a run id", text.USAGE_STATUS),
        ("cancel run/1", "not a run id", text.USAGE_CANCEL),
        ("status " + "r" * 65, "not a run id", text.USAGE_STATUS),
        ("list all", "takes no arguments", text.USAGE_LIST),
        ("pending mine", "takes no arguments", text.USAGE_PENDING),
    ],
)
def test_mistakes_say_what_and_how(typed: str, says: str, usage: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(typed)
    assert says in caught.value.message
    assert usage in caught.value.message
    assert isinstance(caught.value, ValueError)


def test_error_messages_escape_what_was_typed() -> None:
    with pytest.raises(CommandError) as caught:
        parse_command("&lt;!channel&gt;")
    assert "<!channel>" not in caught.value.message
    assert "&lt;!channel&gt;" in caught.value.message


def test_usage_names_every_verb() -> None:
    for verb in ("run", "list", "status", "cancel", "pending", "help"):
        assert f"/crew {verb}" in USAGE


def test_docstring_examples_hold() -> None:
    assert doctest.testmod(commands).failed == 0
    assert doctest.testmod(mrkdwn).failed == 0


def test_non_text_is_a_command_error() -> None:
    with pytest.raises(CommandError):
        parse_command(None)  # type: ignore[arg-type]


# Characters that exercise every branch of the grammar.
GRAMMAR = st.text(
    alphabet=st.sampled_from(list(" \t\u00a0=\"'“”\u2018\u2019\\&;ltgamp<>runRUNblog_-0aZ`é😀\n")),
    max_size=60,
)


def parse_or_error(typed: str) -> commands.Command | CommandError:
    """The command, or the CommandError; any other exception fails the test."""
    try:
        return parse_command(typed)
    except CommandError as exc:
        return exc


@FAST
@given(st.text(max_size=200))
def test_arbitrary_text_only_ever_raises_command_error(typed: str) -> None:
    result = parse_or_error(typed)
    assert not isinstance(result, CommandError) or result.message


@FAST
@given(st.sampled_from(["run blog ", "run ", "status ", "cancel ", ""]), GRAMMAR)
def test_grammar_like_text_only_ever_raises_command_error(prefix: str, typed: str) -> None:
    result = parse_or_error(prefix + typed)
    if isinstance(result, CommandError):
        assert result.message
    elif isinstance(result, RunCommand):
        assert all(key.isidentifier() for key in result.inputs)


CREWS = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,15}", fullmatch=True)
KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)
VALUES = st.text(max_size=40) | st.text(alphabet="\"'“”\u2018\u2019\\=& <>x", max_size=20)


@FAST
@given(CREWS, st.dictionaries(KEYS, VALUES, max_size=6))
def test_rendered_run_commands_parse_back(crew: str, inputs: dict[str, str]) -> None:
    command = RunCommand(crew, inputs)
    # Slack escapes & < > in what it sends; the parser undoes that.
    assert parse_command(escape(format_run(command))) == command


@pytest.mark.parametrize(
    ("sent", "inputs", "mentions"),
    [
        ("run deal approver=<@U0DANA01|dana>", {"approver": "@dana"}, {"approver": "U0DANA01"}),
        ('run deal approver="<@U0DANA01|dana>"', {"approver": "@dana"}, {"approver": "U0DANA01"}),
        ("run deal a=<@U0DANA01>", {"a": "@U0DANA01"}, {"a": "U0DANA01"}),
        ("run deal a=x<@U0DANA01|dana>", {"a": "x@dana"}, {}),
        ("run deal a=&lt;@U0DANA01&gt;", {"a": "<@U0DANA01>"}, {}),
        ("run deal c=<#C0GENERAL|general>", {"c": "#general"}, {}),
        ("run deal u=<https://x.io/?a=1&amp;b=2>", {"u": "https://x.io/?a=1&b=2"}, {}),
        ("run deal u=<http://x.io|x.io>", {"u": "x.io"}, {}),
        ("run deal h=<!here> s=<!subteam^S0TEAM01|@team>", {"h": "@here", "s": "@team"}, {}),
        (
            '  run  deal  q="hi <@U0BEN001|ben>" a=<@U0ANA001|ana> ',
            {"q": "hi @ben", "a": "@ana"},
            {"a": "U0ANA001"},
        ),
    ],
)
def test_slack_markup_reads_back_as_typed_and_keeps_whole_mentions(
    sent: str, inputs: dict[str, str], mentions: dict[str, str]
) -> None:
    """With should_escape, Slack sends mentions, channels and links as markup: the inputs read
    as the person typed them, and a value that is one mention keeps the user's id. A typed
    ``<@U…>`` arrives escaped and stays text, so nobody can forge a mention."""
    assert parse_command(sent) == RunCommand("deal", inputs, mentions)


TYPED_WORDS = st.lists(
    st.sampled_from(["@dana", "@nobody", "#general", "https://x.io/a?b=1&c=2", "a<b>&c", "x"]),
    min_size=1,
    max_size=3,
).map(" ".join)


@FAST
@given(st.dictionaries(KEYS, TYPED_WORDS, max_size=4))
def test_what_the_standin_sends_reads_back_as_typed(inputs: dict[str, str]) -> None:
    """What a person types, sent as Slack sends it (the stand-in's escaping), parses to the
    same inputs; a value that is only ``@dana`` also names Dana's id."""
    ws = Workspace(team_id="T1", bot_user_id="UBOT", bot_id="B1", app_id="A1", clock=lambda: 0)
    ws.add_user("U0DANA01", "dana")
    ws.add_channel("C0GENERAL", "general", ["U0DANA01"])
    typed = format_run(RunCommand("deal", inputs))
    parsed = parse_command(escape_command(ws, typed, should_escape=True))
    dana = {key: "U0DANA01" for key, value in inputs.items() if value == "@dana"}
    assert parsed == RunCommand("deal", inputs, dana)
