"""The run and the review a log line is about, for structured logs (``LOG_FORMAT=json``).

Set where the work about one run happens: the worker's execution of a run (its own
context, copied by CrewAI into the threads it starts), and the bot's handling of a click,
a submission or a reply (each request is handled in a task of its own). A log formatter
reads them; nothing else does.
"""

from __future__ import annotations

from contextvars import ContextVar

RUN_ID: ContextVar[str | None] = ContextVar("countersign_run_id", default=None)
REVIEW_ID: ContextVar[str | None] = ContextVar("countersign_review_id", default=None)


def current() -> dict[str, str]:
    """The fields set in this context: ``run_id`` and ``review_id``, where they apply."""
    fields = {"run_id": RUN_ID.get(), "review_id": REVIEW_ID.get()}
    return {name: value for name, value in fields.items() if value is not None}
