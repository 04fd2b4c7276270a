"""The words the bot says in Slack: escaped exactly once, plain sentences, every expected
failure in the text module's words, and every entry of the text modules said somewhere.

An entry only tests use is dead wording: it is reviewed and translated for nothing. Each
module-level name of a text module must be read by the bot's code: by another entry of its
module, or as ``module.NAME`` / ``from module import NAME`` in ``bot``.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack import block_text, mrkdwn, text
from bot.slack.mrkdwn import escape, unescape
from bot.slack.payloads import PayloadError
from crew_runtime.errors import InputsRefused, NothingToReopen, TextRefused, UsageError
from storage.errors import (
    AlreadyDecided,
    CountersignError,
    LeaseLost,
    ReviewNotFound,
    RunNotFound,
)
from storage.status import DecisionKind, ReviewKind, ReviewStatus, RunStatus
from tests.support.records import HOSTILE, NOW, decided, make_review

ROOT = Path(__file__).resolve().parents[2]
TEXT_MODULES = [
    "bot.slack.text",
    "bot.slack.block_text",
    "bot.slack.thread_text",
    "bot.slack.home_text",
    "bot.slack.mrkdwn",
]


def _path(module: str, root: Path = ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _entries(module: str, root: Path = ROOT) -> list[str]:
    names: list[str] = []
    for node in ast.parse(_path(module, root).read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def _uses(module: str, root: Path = ROOT) -> Counter[str]:
    """How often each name of ``module`` is read in ``bot``'s code, its own reads included."""
    package, _, short = module.rpartition(".")
    uses: Counter[str] = Counter()
    for path in sorted((root / "bot").rglob("*.py")):
        tree = ast.parse(path.read_text())
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == package:
                aliases |= {a.asname or a.name for a in node.names if a.name == short}
            elif isinstance(node, ast.ImportFrom) and node.module == module:
                uses.update(a.name for a in node.names)
        for node in ast.walk(tree):
            if path == _path(module, root) and isinstance(node, ast.Name):
                uses[node.id] += isinstance(node.ctx, ast.Load)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                uses[node.attr] += node.value.id in aliases
    return uses


@pytest.mark.parametrize("module", TEXT_MODULES)
def test_every_entry_is_said_somewhere(module: str) -> None:
    assert _unused(module) == [], f"{module} has entries the bot never says"


def _unused(module: str, root: Path = ROOT) -> list[str]:
    uses = _uses(module, root)
    return [name for name in _entries(module, root) if not uses[name]]


def test_the_check_sees_an_unused_entry(tmp_path: Path) -> None:
    (tmp_path / "bot" / "slack").mkdir(parents=True)
    (tmp_path / "bot" / "slack" / "text.py").write_text(
        'SAID = "a"\nINNER = "b"\nUNSAID = "c"\n\n\ndef said() -> str:\n    return INNER\n'
    )
    (tmp_path / "bot" / "slack" / "listeners.py").write_text(
        "from bot.slack import text as t\nfrom bot.slack.text import said\n\nt.SAID, said()\n"
    )
    assert _unused("bot.slack.text", tmp_path) == ["UNSAID"]


def test_escape_is_exactly_slacks_three_entities() -> None:
    assert escape(HOSTILE) == (
        "&lt;!channel&gt; hi &lt;@U123&gt; &lt;https://evil.example|click to approve&gt; "
        "a&amp;b &lt;!here&gt;"
    )
    assert escape("&amp;") == "&amp;amp;"
    assert escape("\"quotes' *bold* _it_") == "\"quotes' *bold* _it_"


@settings(deadline=None, max_examples=200)
@given(st.text(alphabet="<>&!@#|:/ abcU123;", max_size=80) | st.text(max_size=80))
def test_escape_never_leaves_markup(raw: str) -> None:
    out = escape(raw)
    assert "<" not in out and ">" not in out
    assert unescape(out) == raw
    assert not re.search(r"&(?!amp;|lt;|gt;)", out)


def test_the_words_of_typed_arguments() -> None:
    assert text.arg_problem(("integer",)) == "This must be an integer."
    assert text.arg_problem(("integer", "null")) == "This must be an integer or null."
    assert text.arg_problem(()) == "This is required."
    assert text.arg_problem(("a&b",)) == "This must be a&b."  # plain text: nothing escaped
    assert block_text.arg_hint((), "") == "Expected: JSON, or text."


def test_ephemeral_answers() -> None:
    review = decided(make_review(), DecisionKind.APPROVE)
    assert review.decision is not None
    assert text.already_decided(review.decision) == (
        "This review was already approved by <@U0BOB> at "
        "<!date^1767323345^{date_short_pretty} {time}|2026-01-02 03:09 UTC>."
    )
    assert text.wrong_channel("writer", "C0WRITERS") == (
        "Runs of `writer` can only be started in <#C0WRITERS>."
    )
    assert text.unknown_crew("<!here>", ["blog", "alpha"]) == (
        "There is no crew named `&lt;!here&gt;`. Crews: `alpha`, `blog`."
    )
    assert text.NOT_A_REVIEWER == "You are not a reviewer of this run."


def test_answers_the_listeners_give() -> None:
    closed = make_review(status=ReviewStatus.CANCELLED)
    assert text.already_decided(closed) == "This review is no longer open: its run was cancelled."
    won = decided(make_review(), DecisionKind.REJECT)
    assert text.already_decided(won).startswith("This review was already rejected by <@U0BOB>")
    late = AlreadyDecided("rev_1", "decided", by="U0BOB", kind="approve", at=NOW)
    assert text.too_late(late) == (
        "This review was already approved by <@U0BOB> at "
        "<!date^1767323045^{date_short_pretty} {time}|2026-01-02 03:04 UTC>."
    )
    assert text.too_late(AlreadyDecided("rev_1", "superseded")) == (
        "This review is no longer open: the crew changed since it was asked."
    )
    expired = AlreadyDecided("rev_1", "decided", by="clock", kind="expire", at=NOW)
    assert text.too_late(expired).startswith("This review already expired at <!date^")
    assert text.not_found(RunNotFound("<x>")) == (
        "I can't find the run `&lt;x&gt;`. Its id is in the run's thread."
    )
    assert text.not_found(ReviewNotFound("rev_9")) == "I can't find the review `rev_9`."
    assert text.already_final("run_1", "succeeded") == "Run `run_1` is already over (✅ Succeeded)."
    assert text.cancelled("run_1", "U0ALICE") == "Run `run_1` was cancelled by <@U0ALICE>."
    assert "`blog`" in text.starting("blog")
    assert "appears" not in text.starting("blog")  # the ack cannot know Slack will take it
    assert "If Slack refuses it" in text.starting("blog") and "DM you" in text.starting("blog")
    assert "reject: reason" in text.reply_hint(ReviewKind.TOOL_APPROVAL)
    assert "approve" in text.reply_hint(ReviewKind.TASK_REVIEW)


def test_people_and_channels_that_are_not_slack_ids_stay_text() -> None:
    assert mrkdwn.user_ref("U0ALICE") == "<@U0ALICE>"
    assert mrkdwn.user_ref("cli:<!channel>") == "cli:&lt;!channel&gt;"
    assert mrkdwn.channel_ref("C0DRAFTS") == "<#C0DRAFTS>"
    assert mrkdwn.channel_ref("drafts") == "#drafts"
    assert mrkdwn.code("a`b<") == "`a'b&lt;`"


@pytest.mark.parametrize("status", list(RunStatus))
def test_every_run_status_has_a_word_with_emoji(status: RunStatus) -> None:
    word = block_text.run_status(status)
    assert not word[0].isascii() and word.split()[-1].isalpha()


def test_truncate_never_cuts_an_entity() -> None:
    assert mrkdwn.truncate("&&&&", 12) == "&amp;&amp;…"
    assert mrkdwn.truncate("ok", 2) == "ok"


@pytest.mark.parametrize(
    ("refused", "said"),
    [
        (
            InputsRefused("writer", missing=["topic", "tone"]),
            "Crew `writer` needs `topic` and `tone`. Give each as `topic=value`.",
        ),
        (
            InputsRefused("writer", missing=["topic"]),
            "Crew `writer` needs `topic`. Give it as `topic=value`.",
        ),
        (
            InputsRefused("writer", unknown=["colour"], taken="topic (required)"),
            "Crew `writer` does not take `colour`. It takes topic (required).",
        ),
        (
            TextRefused(
                "the input 'a&b'",
                "contains U+0000 (a NUL character), which cannot be stored: remove it",
            ),
            "The input 'a&amp;b' contains U+0000 (a NUL character), which cannot be stored: "
            "remove it. Nothing was recorded.",
        ),
        (
            NothingToReopen("run_1", 2, [1]),
            "Task 2 has no approved draft to send back. Approved so far: 1.",
        ),
        (
            NothingToReopen("run_1", 1, []),
            "Task 1 has no approved draft to send back. No task is approved yet.",
        ),
        (
            AlreadyDecided("rev_1", "decided", by="U0BOB", kind="changes"),
            "This review was already sent back for changes by <@U0BOB>.",
        ),
        (
            PayloadError("command.text must be a string"),
            "Slack sent this in a form I can't read, so nothing was done.",
        ),
        (LeaseLost("run_1", "t"), "Countersign could not do that, so nothing was done."),
        (UsageError("<!channel> & co."), "&lt;!channel&gt; &amp; co."),
    ],
)
def test_a_refusal_is_told_in_the_text_modules_words_escaped_once(
    refused: CountersignError, said: str
) -> None:
    assert text.refusal(refused) == said
    in_form = text.refusal_in_form(refused)  # plain text: no entities, code marks, mentions
    assert "&amp;" not in in_form and "&lt;" not in in_form and "`" not in in_form
    assert "<@" not in in_form


def test_a_refusal_in_a_form_names_no_id_and_shows_a_date_as_text() -> None:
    late = AlreadyDecided("rev_1", "decided", by="U0BOB", kind="approve", at=NOW)
    assert text.refusal_in_form(late) == (
        "This review was already approved by a reviewer at 2026-01-02 03:04 UTC."
    )
