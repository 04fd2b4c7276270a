"""Who decided, in the words the model reads.

What a model is told about a decision ("send_email was denied by …") is built from the
decision record alone, so every replay tells it the same words: the reviewer's name is
kept in the decision's details when the decision is made (:data:`BY_NAME`, set by the
door that knows it, e.g. Slack's ``users.info``), never looked up again.
"""

from __future__ import annotations

from storage import Decision

__all__ = ["BY_NAME", "reviewer"]

BY_NAME = "by_name"  # a decision's details key: the reviewer's name when they decided


def reviewer(decision: Decision) -> str:
    """``reviewer Priya Raman`` when the decision kept a name, else ``a reviewer (U0YOU)``."""
    name = decision.details.get(BY_NAME) if isinstance(decision.details, dict) else None
    if isinstance(name, str) and name.strip():
        return f"reviewer {' '.join(name.split())}"
    return f"a reviewer ({decision.decided_by})"
