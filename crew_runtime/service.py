"""What people do to runs, whatever the door (CLI or Slack): start, decide, cancel.

Validation happens here, before anything is written; a bad request raises
``UsageError`` (or a storage error) and changes nothing.
"""

from __future__ import annotations

import json

from crew_runtime.arguments import parse_edited_args
from crew_runtime.config import Config
from crew_runtime.errors import UsageError
from storage import DecisionKind, NewDecision, Review, ReviewKind, Run, Store


class Countersign:
    """The runtime's front door, shared by the CLI and the Slack bot."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config

    def start_run(
        self,
        crew: str,
        inputs: dict[str, str],
        *,
        started_by: str | None = None,
        channel: str | None = None,
    ) -> Run:
        """Queue a run of a configured crew.

        Raises:
            UnknownCrewError: no crew of that name in the configuration.
            UsageError: a required input is missing.
        """
        spec = self.config.get(crew)
        missing = [name for name in spec.required_inputs if not inputs.get(name)]
        if missing:
            raise UsageError(
                f"crew {crew!r} needs the input(s) {', '.join(missing)} "
                f"(give them as {missing[0]}=value)"
            )
        return self.store.create_run(
            crew, inputs, started_by=started_by, channel=channel or spec.channel
        )

    def decide(self, review_id: str, kind: str, text: str | None, *, by: str) -> Review:
        """Record a reviewer's decision; the run resumes once no review of it is pending.

        Raises:
            UsageError: unknown decision, or text missing where it is needed.
            ReviewNotFound, AlreadyDecided, DecisionNotAllowed: from storage.
        """
        decision = parse_decision(kind)
        text = (text or "").strip() or None
        if decision.needs_text and text is None:
            raise UsageError(f"{decision.value!r} needs text: {_TEXT_HINTS[decision]}")
        if not by.strip():
            raise UsageError("a decision needs the reviewer's name (--by USER)")
        if decision == DecisionKind.EDIT and text is not None:
            text = self._checked_args(review_id, text)
        return self.store.decide(review_id, NewDecision(decision, by.strip(), text))

    def _checked_args(self, review_id: str, text: str) -> str:
        """An edit of a tool call is its new arguments: a JSON object fitting the schema."""
        review = self.store.get_review(review_id)
        if review.kind != ReviewKind.TOOL_APPROVAL:
            return text
        try:
            args = parse_edited_args(text, review.details.get("schema") or {})
        except ValueError as exc:
            raise UsageError(
                f"the edited arguments of {review.details.get('tool')}: {exc}"
            ) from None
        return json.dumps(args, ensure_ascii=False)

    def cancel(self, run_id: str, *, by: str) -> Run:
        return self.store.cancel_run(run_id, by)


_TEXT_HINTS = {
    DecisionKind.EDIT: "the edited text that replaces the draft",
    DecisionKind.CHANGES: "the feedback for the agent",
    DecisionKind.ANSWER: "the answer to the question",
}

_HUMAN_DECISIONS = [k for k in DecisionKind if k != DecisionKind.EXPIRE]


def parse_decision(word: str) -> DecisionKind:
    try:
        decision = DecisionKind(word.strip().lower())
    except ValueError:
        decision = None
    if decision is None or decision == DecisionKind.EXPIRE:
        choices = "|".join(k.value for k in _HUMAN_DECISIONS)
        raise UsageError(f"unknown decision {word!r}: use one of {choices}")
    return decision
