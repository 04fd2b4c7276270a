"""A ``@human_feedback(emit=[...])`` decision routes the flow to the outcome the reviewer
chose, never to one guessed from its name: CrewAI's documented order
``emit=["approved", "rejected", "needs_revision"]``, where a name match once sent "Request
changes" to ``handle_rejection``. A free-text decision is read by the flow's own ``llm=``,
through the journal; without a way to read it, the person is asked to choose. Every worker is
a real ``countersign worker`` process; the flow's ``llm="gpt-4o-mini"`` is never contacted
(the workers have no OpenAI key and no network to reach it).
"""

from __future__ import annotations

import pytest

from bot.cli.main import main
from crew_runtime.errors import UsageError
from storage import DecisionKind, FlowFeedbackDetails, RunStatus
from tests.support.harness import ON_SQLITE, Bench

pytestmark = [pytest.mark.slow, ON_SQLITE]

CONFIG = """
[flows.documented]
factory = "tests.support.shape_crews:documented_feedback_flow"

[flows.read_feedback]
factory = "tests.support.shape_crews:read_feedback_flow"
"""

OUTCOMES = ("approved", "rejected", "needs_revision")


@pytest.fixture
def flows(bench: Bench) -> Bench:
    bench.add_crews(CONFIG)
    return bench


def _outcomes(bench: Bench) -> list[str]:
    return [e["outcome"] for e in bench.effects("flow_outcome")]


def _decide(
    bench: Bench, run_id: str, kind: str, text: str | None = None, outcome: str | None = None
) -> None:
    review = bench.pending(run_id)
    bench.service.decide(review.id, DecisionKind(kind), text, by="U1", outcome=outcome)


def test_the_chosen_outcome_runs_its_listener_in_crewais_documented_order(
    flows: Bench,
) -> None:
    bench = flows
    run = bench.start("documented", topic="otters")
    bench.work()
    review = bench.pending(run.id)
    assert isinstance(review.details, FlowFeedbackDetails)
    assert review.details.outcomes == OUTCOMES
    assert review.details.reads_feedback  # llm= is set: a free reply can be read
    with pytest.raises(UsageError, match="not one of its outcomes"):
        _decide(bench, run.id, "changes", "again", outcome="revise")

    _decide(bench, run.id, "changes", "mention the rivers", outcome="needs_revision")
    bench.work()
    assert _outcomes(bench) == ["needs_revision"]  # not handle_rejection
    (note,) = bench.effects("flow_outcome")
    assert note["feedback"] == "mention the rivers"
    redraft = bench.pending(run.id)
    assert redraft.prompt == "Draft 2 on otters"

    _decide(bench, run.id, "approve", outcome="approved")
    bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == "PUBLISHED: Draft 2 on otters"
    assert _outcomes(bench) == ["needs_revision", "approved"]


def test_a_decision_naming_no_outcome_is_read_by_the_flows_model_once(flows: Bench) -> None:
    bench = flows
    run = bench.start("read_feedback", topic="otters")
    bench.work()
    _decide(bench, run.id, "changes", "do it again, mention the rivers")
    second = bench.work()
    assert _outcomes(bench) == ["needs_revision"]
    collapses = [c for c in bench.llm_calls() if c["model"] == "scripted/collapse"]
    assert [c["pid"] for c in collapses] == [second]
    journal = bench.store.load_journal(run.id)
    assert [e.stream for e in journal if "collapse" in e.stream] == ["flow:draft~collapse"]

    _decide(bench, run.id, "changes", "bin it")
    bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == "DISCARDED: Draft 2 on otters"
    assert _outcomes(bench) == ["needs_revision", "rejected"]


def test_a_kind_that_reads_as_no_outcome_asks_the_person_to_choose(flows: Bench) -> None:
    bench = flows
    run = bench.start("article", topic="otters")  # emit=["approved", "rejected"], no llm=
    bench.work()
    with pytest.raises(UsageError, match="choose one of the flow's outcomes: approved, rejected"):
        _decide(bench, run.id, "changes", "shorter")
    review = bench.pending(run.id)
    argv = ["reviews", "decide", review.id, "changes", "shorter", "--by", "U1"]
    argv += ["--outcome", "rejected", "--config", str(bench.config_path)]
    assert main([*argv, "--database-url", bench.db_url], {}) == 0  # the command line's door
    bench.work()
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == "SHELVED: Draft on otters (round 0) (shorter)"
