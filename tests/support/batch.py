"""What the batch review tests and ``bench/batch.py`` share: a configuration with a crew per
case, runs paused at one review each (as a worker pauses them), and a person's steps through
*Decide several…* (or *Approve all N shown*) in the Slack stand-in (from Home or ``/crew
pending``, the choosing modal, the confirmation, the answer)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from bot.slack import block_text
from bot.slack.batch_payloads import BATCH, CONFIRM
from bot.slack.payloads import action_id, callback_id
from crew_runtime.digests import proposed_digest
from sandbox import StandInThread
from sandbox.payloads import interaction_base
from storage import NewReview, ReviewKind, Store
from tests.support.slack_harness import ALICE, BOB, CHANNEL, MALLORY, wait_until

Json = dict[str, Any]

LEA = "ULEA"  # the chain's first stage is Alice's and Lea's
CONFIG = f"""
[crews.writer]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}"]

[crews.bobs]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{BOB}"]

[crews.deal]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
reviewers = ["{ALICE}", "{BOB}", "{MALLORY}"]
approvals_required = 2

[crews.chain]
factory = "tests.support.crews:writer"
channel = "{CHANNEL}"
stages = [
  {{ name = "first", reviewers = ["{ALICE}", "{LEA}"] }},
  {{ name = "second", reviewers = ["{BOB}"] }},
]
"""


def paused(store: Store, *crews: str) -> list[str]:
    """A run of each of ``crews`` paused at one review, as a worker pauses it; their
    reviews' ids (all made before any is decided: the claim takes the oldest run)."""
    ids = []
    for crew in crews:
        store.create_run(crew, {"topic": "otters"}, started_by=MALLORY, channel=CHANNEL)
        run = store.claim_run("w1", timedelta(seconds=30))
        assert run is not None and run.lease_token is not None
        ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="t", seq=0, prompt=f"the {crew} draft")
        ask = replace(ask, digest=proposed_digest(run.id, ask))
        (review,) = store.suspend_run(run.id, run.lease_token, [ask])
        ids.append(review.id)
    return ids


def modal(slack: StandInThread, user: str, callback: str) -> Json:
    """``user``'s open modal of ``callback`` (once the loading one is filled)."""
    return wait_until(
        lambda: next((v for v in slack.open_views(user) if v.get("callback_id") == callback), None),
        what=f"{user}'s {callback} modal",
    )


def listed(chooser: Json) -> list[str]:
    """The ids of the reviews the choosing modal offers."""
    return [
        o["value"].split()[0]
        for b in chooser["blocks"]
        if b["block_id"].startswith("pick:")
        for o in b["element"]["options"]
    ]


def choose(
    slack: StandInThread, user: str, only: str | None = None, **inputs: str
) -> tuple[Json, Json]:
    """Tick every review the choosing modal lists (or ``only`` that one) and submit, with
    ``inputs`` (``decision``, ``text``): (the choosing modal as shown, the confirmation)."""
    chooser = modal(slack, user, callback_id(BATCH))
    assert only is None or only in listed(chooser), (only, listed(chooser))
    ticked = {}
    for block in chooser["blocks"]:
        if block["block_id"].startswith("pick:"):
            values = [o["value"] for o in block["element"]["options"]]
            values = [v for v in values if only is None or v.split()[0] == only]
            if values:
                ticked[block["block_id"]] = values
    answer = slack.submit_view(user, chooser["id"], {**ticked, **inputs})
    assert answer.ok and not answer.problems, (answer.body, answer.problems)
    return chooser, modal(slack, user, callback_id(CONFIRM))


def answered(slack: StandInThread, user: str, view_id: str) -> str:
    """The words of the modal ``view_id`` once it answers what was recorded (neither the
    confirmation nor "Recording…")."""

    def said() -> str | None:
        view = next((v for v in slack.open_views(user) if v["id"] == view_id), None)
        blocks = (view or {}).get("blocks", [])
        words = "".join(str(b.get("text", {}).get("text", "")) for b in blocks)
        done = blocks and CONFIRM not in [b.get("block_id") for b in blocks]
        return words if done and block_text.BATCH_RECORDING not in words else None

    return wait_until(said, what=f"{user}'s batch answer")


def from_home(slack: StandInThread, user: str, action: str = BATCH, showing: str = "") -> None:
    """``user`` opens Home and clicks *Decide several…* there (or ``action``: *Approve all
    N shown*, ``SHOWN[kind]``), once the Home tab offers it (and lists ``showing``)."""
    slack.open_home(user)
    home = wait_until(
        lambda: (
            (v := slack.home_view(user))
            and any(b.get("block_id") == BATCH and showing in str(b) for b in v["blocks"])
            and v
        ),
        what=f"{user}'s Home to offer Decide several",
    )
    click = slack.click_in_view(user, home["id"], action_id(action))
    assert click.ok, click.body


def from_pending(slack: StandInThread, user: str, action: str = BATCH) -> None:
    """``user`` types ``/crew pending`` and clicks *Decide several…* in its answer (or
    ``action``)."""
    before = len(slack.ephemerals(user))
    slack.slash_command(user, CHANNEL, "/crew", "pending")
    listing = wait_until(lambda: slack.ephemerals(user)[before:], what="/crew pending")[0]
    assert any(b.get("block_id") == BATCH for b in listing.blocks), listing.text
    slack.click_button(user, CHANNEL, listing.ts, action_id(action))


def forged_confirmation(
    slack: StandInThread, user: str, view_id: str, items: list[str], kind: str = "approve"
) -> None:
    """A click on a batch confirmation's button naming ``items`` (``<review id> <digest>``)
    that Slack's client would not send (reviews never offered, a digest not the one shown);
    a forged request, or a stale one, would."""
    meta = {"channel_id": CHANNEL, "items": items}
    view = {
        "id": view_id,
        "type": "modal",
        "callback_id": callback_id(CONFIRM),
        "private_metadata": json.dumps(meta),
        "blocks": [],
        "state": {"values": {}},
    }
    payload = interaction_base(slack.standin.workspace, "block_actions", user, "x")
    button = {"action_id": action_id(CONFIRM), "block_id": CONFIRM, "type": "button"}
    payload.update(
        container={"type": "view", "view_id": view_id},
        view=view,
        actions=[{**button, "value": kind, "action_ts": "1.0"}],
    )
    assert slack.send_interaction(payload).ok
