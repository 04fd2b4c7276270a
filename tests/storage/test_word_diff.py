"""What changed between two drafts: the word diff (``storage.word_diff``), its message in
Slack (``bot.slack.diff_blocks``, checked by the stand-in's Block Kit rules) and its plain
form in the audit trail."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack import thread_text
from bot.slack.diff_blocks import DIFF_BUDGET, changes_message
from bot.slack.elements import SECTION_LIMIT
from sandbox.blockkit import validate_blocks
from storage.word_diff import plain, word_diff

words = st.lists(st.sampled_from(["otters", "hold", "hands", "<!channel>", "&", "\n", "  "]))


@settings(max_examples=200, deadline=None)
@given(words, words)
def test_the_pieces_make_both_drafts(old: list[str], new: list[str]) -> None:
    a, b = " ".join(old), " ".join(new)
    pieces = word_diff(a, b)
    assert "".join(p.text for p in pieces if p.op != "+") == a
    assert "".join(p.text for p in pieces if p.op != "-") == b
    message = changes_message(a, b, 1)
    if a == b:
        assert message is None and plain(pieces) == ""
    if message is not None:
        assert validate_blocks(message.blocks) == []
        assert "<!channel>" not in str(message.blocks)


def test_a_small_change_shows_its_words_struck_and_bold_with_a_little_context() -> None:
    old = "Otters hold hands while they sleep, so that they do not drift apart. " * 3
    new = old.replace("drift apart", "float away", 1)
    message = changes_message(old, new, 2)
    assert message is not None and message.text == "What changed since round 2"
    shown = message.blocks[1]["text"]["text"]
    assert shown == "that they do not ~drift apart.~ *float away.* Otters hold hands while"
    assert "2 words removed, 2 added" in message.blocks[2]["elements"][0]["text"]
    assert plain(word_diff(old, new)) == (
        "that they do not [-drift apart.-]{+float away.+} Otters hold hands while"
    )


def test_a_long_revision_shows_its_first_changes_and_says_how_many_more() -> None:
    old = " ".join(f"Paragraph {n} says the otters are calm today." for n in range(400))
    new = old.replace("calm", "restless")
    message = changes_message(old, new, 1)
    assert message is not None
    assert validate_blocks(message.blocks) == []
    shown = message.blocks[1]["text"]["text"]
    assert len(shown) <= DIFF_BUDGET < SECTION_LIMIT
    assert shown.startswith("says the otters are ~calm~ *restless* today. Paragraph 1 says")
    more = message.blocks[-1]["elements"][0]["text"]
    hidden = 400 - shown.count("*restless*")
    assert more == f"…and {hidden} more changes: the whole revised draft follows."
    assert 0 < hidden < 400


def test_a_draft_rewritten_whole_says_so_instead_of_a_diff() -> None:
    message = changes_message("short", "otters " * 2000, 3)
    assert message is not None
    assert validate_blocks(message.blocks) == []
    assert message.blocks[1]["text"]["text"].startswith("Its first change is too long")
    assert len(message.blocks) == 3


def test_the_counts_say_word_and_change_in_the_singular_and_leave_out_zero() -> None:
    message = changes_message("Otters hold hands.", "Otters hold paws.", 1)
    assert message is not None
    assert message.blocks[2]["elements"][0]["text"].startswith("1 word removed, 1 added ·")
    added = changes_message("Otters hold hands today.", "Otters hold hands tightly today.", 1)
    assert added is not None
    assert added.blocks[2]["elements"][0]["text"].startswith("1 word added ·")
    assert thread_text.changes_not_shown(1) == (
        "…and 1 more change: the whole revised draft follows."
    )
    assert thread_text.changes_count(0, 1).startswith("1 word added ·")
    assert thread_text.changes_count(3, 0).startswith("3 words removed ·")


def _article(paragraphs: int) -> str:
    kinds = ["otters", "river", "tools", "stones", "kelp", "sea", "swim", "hold", "hands"]
    return "\n\n".join(
        " ".join(kinds[(p * 7 + w * 3) % len(kinds)] for w in range(60)) for p in range(paragraphs)
    )


def test_one_word_changed_in_a_long_article_shows_that_word() -> None:
    for paragraphs in (30, 60, 500):  # about 11,000, 22,000 and 180,000 characters
        old = _article(paragraphs)
        middle = old.index("\n\n", len(old) // 2) + 2
        new = old[:middle] + "Otters, " + old[middle:]
        message = changes_message(old, new, 1)
        assert message is not None
        assert "*Otters,*" in message.blocks[1]["text"]["text"], paragraphs
        assert message.blocks[2]["elements"][0]["text"].startswith("1 word added ·")


def test_a_change_too_long_to_show_is_said_so_not_shown_as_context_alone() -> None:
    old = "Intro. " + " ".join(f"w{n}" for n in range(1500))
    new = "Intro. " + " ".join(f"x{n}" for n in range(1500))
    message = changes_message(old, new, 1)
    assert message is not None
    assert message.blocks[1]["text"]["text"].startswith("Its first change is too long")
