"""An agent that reasons before it works (``Agent(reasoning=True)``) is reviewed and revised
like any other: its reasoning is journaled and replayed, never asked again on a resume.

Plain CrewAI (the same crew kicked off in this process, a console that approves at once) is
the measure: under Countersign the run makes the same model calls plus one per revision,
the reviewer's feedback reaches the redraft, and the run finishes once approved. Every
worker is a real ``countersign worker`` process on the scripted model.
"""

from __future__ import annotations

from typing import Any

import pytest
from crewai.core.providers.human_input import (
    SyncHumanInputProvider,
    reset_provider,
    set_provider,
)

from storage import ReviewKind, RunStatus
from tests.support.harness import ON_SQLITE, Bench
from tests.support.shape_crews import ReasoningLLM, reasoning

pytestmark = [pytest.mark.slow, ON_SQLITE]

CONFIG = """
[crews.reasoning]
factory = "tests.support.shape_crews:reasoning"
"""


class _ApproveAtOnce(SyncHumanInputProvider):
    """The console of plain CrewAI, where the person presses Enter (approves) at once."""

    def _prompt_input(self, crew: Any) -> str:  # type: ignore[override]
        return ""


def _plain_crewai_calls(how: str) -> int:
    """The model calls plain CrewAI makes for this crew, reviewed and approved once."""
    crew = reasoning({"topic": "otters", "how": how})
    token = set_provider(_ApproveAtOnce())
    try:
        crew.kickoff(inputs={"topic": "otters"})
    finally:
        reset_provider(token)
    (agent,) = crew.agents
    assert isinstance(agent.llm, ReasoningLLM)
    return agent.llm.calls


@pytest.mark.parametrize("how", ["reasoning", "config"])
def test_a_reasoning_agent_is_revised_and_finishes_with_its_reasoning_replayed(
    bench: Bench, how: str
) -> None:
    plain = _plain_crewai_calls(how)
    assert plain == 3  # two reasoning calls (a plan, then a refined one), one draft
    bench.add_crews(CONFIG)
    run = bench.start("reasoning", topic="otters", how=how)
    first = bench.work()
    review = bench.pending(run.id)
    assert review.kind == ReviewKind.TASK_REVIEW
    assert bench.llm_calls_by_pid()[first] == plain
    first_draft = review.prompt

    bench.decide(run.id, "changes", "mention the rivers")
    second = bench.work()
    revised = bench.pending(run.id)
    assert revised.id != review.id and revised.prompt != first_draft
    assert "mention the rivers" in revised.prompt  # the feedback reached the redraft
    assert bench.llm_calls_by_pid()[second] == 1  # the redraft; no reasoning asked again

    bench.decide(run.id, "approve")
    third = bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.divergence is None
    assert done.output == revised.prompt
    assert bench.llm_calls_by_pid()[third] == 0
    workers = [c for c in bench.llm_calls() if c["pid"] in (first, second, third)]
    assert len(workers) == plain + 1  # plain CrewAI + one per revision
    hashes = [c["prompt_sha256"] for c in workers]
    assert len(hashes) == len(set(hashes)), "a recorded turn was sent to the model again"
