"""Rules and digests through the Slack stand-in: a rule's decision is one line in the run's
thread, the calls no rule decides are asked with their action digest on the card, and a click
approves exactly that digest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crew_runtime.config import Config
from storage import RunStatus, Store
from tests.support.crews import effects
from tests.support.slack_harness import (
    ALICE,
    BOB,
    CHANNEL,
    configured,
    review_with_buttons,
    root_of,
    said,
    slack_and_bot,
    text_of,
)

pytestmark = pytest.mark.slow

CONFIG = f"""
[crews.payroll]
factory = "tests.support.crews:payroll"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.payroll.gates.pay]
rules = [{{ name = "acme", when = "args.to == 'ACME' && args.amount < 5000", decide = "approve" }}]
"""


@pytest.fixture
def setup(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Config, Store]]:
    monkeypatch.setenv("COUNTERSIGN_TEST_EFFECTS", str(tmp_path / "effects.jsonl"))
    with configured(tmp_path, db_url, CONFIG) as pair:
        yield pair


def test_rule_lines_in_the_thread_then_a_card_with_its_digest(
    setup: tuple[Config, Store], tmp_path: Path
) -> None:
    config, store = setup
    with slack_and_bot(config, store) as (slack, _bot):
        slack.slash_command(ALICE, CHANNEL, "/crew", "run payroll")
        root = root_of(slack)
        card = review_with_buttons(slack, root["ts"])  # GLOBEX 1200: no rule applies
        (review,) = store.list_reviews()
        assert review.details.args == {"amount": 1200, "to": "GLOBEX"}
        assert review.digest is not None and f"action `{review.digest[:12]}`" in text_of(card)
        lines = [
            text_of(m)
            for m in slack.thread(CHANNEL, root["ts"])
            if "approved by rule `acme`" in text_of(m)
        ]
        assert len(lines) == 2, lines
        assert "amount 1500 &lt; 5000" in lines[0] and "amount 2000 &lt; 5000" in lines[1]

        slack.click_button(BOB, CHANNEL, card["ts"], "countersign:approve")
        said(slack, root["ts"], "Receipt")
        run = store.get_run(review.run_id)
        assert run.status == RunStatus.SUCCEEDED, run.error
        decided = store.get_review(review.id)
        assert decided.decision is not None and decided.decision.digest == review.digest
    paid = [
        (e["amount"], e["to"]) for e in effects(tmp_path / "effects.jsonl") if e["kind"] == "paid"
    ]
    assert paid == [(1500, "ACME"), (2000, "ACME"), (1200, "GLOBEX")]
