"""Links into the Slack workspace, built as Slack builds permalinks (no ``chat.getPermalink``
call per message): the Home tab's, ``/crew pending``'s and the audit export's."""

from __future__ import annotations

from dataclasses import dataclass

from storage import Review, Run


def message_link(workspace: str, channel: str, ts: str) -> str:
    """``https://acme.slack.com/archives/C…/p1700000000000100``: a message of ``channel``
    (``workspace`` is ``auth.test``'s ``url``)."""
    return f"{workspace.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"


@dataclass(frozen=True)
class Links:
    """Links into the workspace, built as Slack builds permalinks (no call per message):
    ``{workspace URL}archives/{channel}/p{ts without the dot}``, and for a thread reply
    ``?thread_ts=…&cid=…``. ``workspace`` is ``auth.test``'s ``url``."""

    workspace: str

    def run(self, run: Run) -> str | None:
        if run.channel is None or run.thread_ts is None:
            return None
        return self._message(run.channel, run.thread_ts)

    def review(self, review: Review, run: Run | None) -> str | None:
        """The review's message in its run's thread; the thread when it is not posted yet."""
        if review.channel is not None and review.message_ts is not None:
            url = self._message(review.channel, review.message_ts)
            if run is not None and run.thread_ts not in (None, review.message_ts):
                url += f"?thread_ts={run.thread_ts}&cid={review.channel}"
            return url
        return None if run is None else self.run(run)

    def _message(self, channel: str, ts: str) -> str:
        return message_link(self.workspace, channel, ts)
