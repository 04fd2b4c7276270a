"""An outbox row Slack refused for good: given up on, said, and recorded.

A refusal (``bot.slack.slack_errors.is_transient`` says which failures are not) is
answered the same way however often the call is made again, so the row is not retried: it
is settled without being sent (``Store.give_up_outbox``, its error kept), and the run's
later rows go out where they still can. Whoever started the run is told in their DM what
could not be posted, why and what fixes it (``bot.slack.refusal_text``: "invite
@Countersign to #channel"), once per run and error; the DM is a step of the row, so a
retry does not send it twice. A run whose root message was refused can never have a
thread, so nobody could see its reviews: it is cancelled, its error saying why (the
run's status, ``/crew status``, the API), rather than left waiting. Each give-up is
logged with Slack's own explanation and counted (``countersign_outbox_given_up_total``).
A token Slack no longer takes (``token_revoked``, ``account_inactive``) reaches nobody: the
row is given up, logged at ERROR and counted, and its run is left as it is (decidable
through the HTTP API and the CLI) for a new token to carry on.
"""

from __future__ import annotations

import logging
import re

from slack_sdk.errors import SlackApiError

from bot.slack import refusal_text
from bot.slack.elements import section
from bot.slack.handlers import sync
from bot.slack.message import Message
from bot.slack.slack_errors import api_error, explanation, is_transient, slack_said
from bot.slack.steps import Steps, Thread
from crew_runtime import metrics
from storage import AlreadyFinal, OutboxClaimLost, OutboxKind, Run, RunStatus
from storage.outbox import SlackRefusal

__all__ = ["give_up"]

log = logging.getLogger(__name__)

_SLACK_USER = re.compile(r"[UW][A-Z0-9]{2,}")  # whom a DM can reach (not "api:ci", "cli:x")
WHO = "countersign"  # who cancels a run whose thread Slack refused


async def give_up(steps: Steps, exc: SlackApiError) -> None:
    """Settle ``steps``' row as refused by ``exc``, tell the run's starter, and cancel the
    run if it is its root message that was refused.

    Raises:
        OutboxClaimLost: another dispatcher holds the row now; it will do this itself.
        SlackApiError, ClientError, TimeoutError: the DM failed for a while: the row is
            tried again later (its refused call made again, the DM posted once).
    """
    message = steps.message
    run = await sync(steps.store.get_run, message.run_id)
    error, said = api_error(exc), explanation(exc)
    root = OutboxKind(message.kind) == OutboxKind.RUN_STARTED
    log.log(
        logging.ERROR if error in _TOKEN_GONE else logging.WARNING,
        "outbox %d (%s) of run %s: slack refused it: %s; given up (not retried)",
        message.id,
        message.kind,
        run.id,
        said,
    )
    cancelled = False
    if root and error not in _TOKEN_GONE:
        cancelled = await _cancel(steps, run, f"Slack refused its thread in {run.channel}: {error}")
    told_before = await sync(steps.store.gave_up_before, run.id, message.id, error)
    if not told_before and error not in _TOKEN_GONE:
        await _tell(steps, run, error, exc, root=root)
    refusal = SlackRefusal(error, slack_said(exc), WHO, cancelled)
    if not await sync(
        steps.store.give_up_outbox, message.id, steps.token, f"slack: {said}", refusal
    ):
        raise OutboxClaimLost(message.id)
    metrics.count_given_up(message.kind, error)


# The app's token no longer works: no DM can go out either, and the run is not cancelled
# (a new token, and serve restarted, brings back everything but the rows given up).
_TOKEN_GONE = frozenset({"token_revoked", "account_inactive", "invalid_auth", "not_authed"})


async def _cancel(steps: Steps, run: Run, why: str) -> bool:
    """Cancel ``run``, whose thread Slack refused: whether it is cancelled because of that
    (by this call, or by an earlier try of the same row whose DM failed for a while)."""
    try:
        await sync(steps.store.cancel_run, run.id, WHO, why=why)
    except AlreadyFinal:  # it ended before its thread was refused, or a try before ended it
        now = await sync(steps.store.get_run, run.id)
        return now.status == RunStatus.CANCELLED and now.error == f"cancelled by {WHO}: {why}"
    return True


async def _tell(steps: Steps, run: Run, error: str, exc: SlackApiError, *, root: bool) -> None:
    """DM the run's starter what was refused; a DM Slack refuses too is logged, no more."""
    person = run.started_by
    if person is None or not _SLACK_USER.fullmatch(person) or run.channel is None:
        log.warning("run %s: nobody in Slack to tell that Slack refused it", run.id)
        return
    data = exc.response.data
    needed = data.get("needed") if isinstance(data, dict) else None
    said = refusal_text.refused(
        run.crew, run.id, run.channel, error, root=root, needed=str(needed) if needed else None
    )
    try:
        opened = await steps.client.conversations_open(users=person)
        dm = str(opened["channel"]["id"])
        await steps.post(f"told:{error}", Thread(dm, None), Message(said, [section(said)]))
    except SlackApiError as failed:
        if is_transient(failed):
            raise
        said = explanation(failed)
        log.warning("run %s: could not tell %s that Slack refused it: %s", run.id, person, said)
