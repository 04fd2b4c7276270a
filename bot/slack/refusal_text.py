"""The words of a DM to whoever started a run when Slack refused one of its messages for
good (``bot.slack.given_up``): what could not be posted, why, and what fixes it.

Nothing here does I/O; ids and codes go into mrkdwn through ``code``/``channel_ref``.
"""

from __future__ import annotations

from bot.slack.mrkdwn import channel_ref, code

APP = "@Countersign"  # the bot as a person invites it (manifest.yml's display name)


def why(error: str, channel: str, needed: str | None = None) -> str:
    """Why Slack refused a message in ``channel``, in a person's words."""
    where = channel_ref(channel)
    if error == "not_in_channel":
        return f"Countersign is not a member of {where}"
    if error == "channel_not_found":
        return (
            f"Countersign cannot see {where} (a private channel it was not invited to, or "
            "one that is gone)"
        )
    if error == "is_archived":
        return f"{where} is archived"
    if error == "missing_scope":
        return f"the app was installed without the scope {code(needed or '?')}"
    return f"Slack refused the message ({code(error)})"


def fix(error: str, channel: str) -> str:
    """What the person can do about it."""
    where = channel_ref(channel)
    if error in ("not_in_channel", "channel_not_found"):
        return (
            f"Invite {APP} to {where} (type `/invite {APP}` there), or give the crew a "
            "channel it is in (`channel` in its configuration)"
        )
    if error == "is_archived":
        return "Unarchive it, or give the crew another channel (`channel` in its configuration)"
    if error == "missing_scope":
        return "Ask whoever runs Countersign to reinstall the app from its `manifest.yml`"
    return "This is Countersign's mistake: tell whoever runs it (its log has Slack's explanation)"


def refused(
    crew: str, run_id: str, channel: str, error: str, *, root: bool, needed: str | None = None
) -> str:
    """The DM (mrkdwn): the run's thread could not be started (the run is cancelled), or one of its
    messages could not be posted (the run goes on)."""
    run = f"{code(run_id)} of {code(crew)}"
    if root:
        what = (
            f"Your run {run} could not start its thread in {channel_ref(channel)}: "
            f"{why(error, channel, needed)}, so nobody could review it and it was cancelled."
        )
        then = f"{fix(error, channel)}, then start it again."
    else:
        what = (
            f"A message of your run {run} could not be posted in its thread in "
            f"{channel_ref(channel)}: {why(error, channel, needed)}."
        )
        then = f"{fix(error, channel)}. The run goes on; its other messages still go out."
    return f"{what}\n{then}"
