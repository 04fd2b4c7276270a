"""Several gated calls in one model turn become several reviews, each decided on its own.

The ``parallel_payments`` agent speaks native function calling: its first turn asks for two
payments at once, which CrewAI runs in parallel threads (or one by one when a tool of the turn
has ``max_usage_count``). Both calls are gated, so the run must wait for two reviews, and each
call must get its own decision on resume, whatever order the threads reached the hooks in.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from crew_runtime.compat import agent_executor
from crew_runtime.offline.drafts import parse_draft
from storage import DecisionKind, Review, ReviewKind, RunStatus
from tests.support.harness import Bench

ACME = {"amount": 1500, "to": "ACME"}
GLOBEX = {"amount": 2000, "to": "GLOBEX"}


def _reviews(bench: Bench, run_id: str) -> dict[str, Review]:
    """The pending reviews of a run, by payee."""
    pending = bench.store.list_reviews(run_id=run_id)
    return {review.details.args["to"]: review for review in pending}


def _paused(bench: Bench, sequential: str = "no") -> tuple[str, dict[str, Review]]:
    run = bench.start("parallel_payments", sequential=sequential)
    bench.work_here()
    assert bench.run(run.id).status == RunStatus.WAITING, bench.run(run.id).error
    reviews = _reviews(bench, run.id)
    assert set(reviews) == {"ACME", "GLOBEX"}
    assert {r.kind for r in reviews.values()} == {ReviewKind.TOOL_APPROVAL}
    assert reviews["ACME"].details.args == ACME
    assert reviews["GLOBEX"].details.args == GLOBEX
    assert bench.effects("paid") == []
    return run.id, reviews


def _paid(bench: Bench) -> list[tuple[int, str]]:
    return [(e["amount"], e["to"]) for e in bench.effects("paid")]


@pytest.mark.parametrize("sequential", ["no", "yes"], ids=["parallel", "sequential"])
def test_two_gated_calls_in_one_turn_wait_for_two_separate_decisions(
    bench: Bench, sequential: str
) -> None:
    run_id, reviews = _paused(bench, sequential)
    # In the order of the model's calls, whichever thread got there first.
    assert (reviews["ACME"].seq, reviews["GLOBEX"].seq) == (0, 1)
    assert [c["reply_kind"] for c in bench.llm_calls()] == ["tool_calls"]

    bench.service.decide(reviews["ACME"].id, DecisionKind.APPROVE, None, by="U1")
    assert bench.run(run_id).status == RunStatus.WAITING  # GLOBEX is still undecided
    bench.work_here()
    assert _paid(bench) == []

    bench.service.decide(reviews["GLOBEX"].id, DecisionKind.REJECT, "too much", by="U1")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert _paid(bench) == [(1500, "ACME")]
    notes = parse_draft(done.output or "").notes
    assert notes == (
        "pay: paid 1500 to ACME",
        "pay: pay was denied by a reviewer (U1): too much. It was not run.",
    )
    # Two turns in all: the resumed execution replayed the tool-call turn from the journal
    # and sent the model only the new one, which had both results.
    calls = bench.llm_calls()
    assert [c["reply_kind"] for c in calls] == ["tool_calls", "final"]
    assert calls[0]["prompt_sha256"] != calls[1]["prompt_sha256"]
    journal = bench.store.load_journal(run_id)
    assert [(e.kind, e.seq) for e in journal if e.kind == "llm"] == [("llm", 0), ("llm", 1)]
    tools = {e.seq: e.payload for e in journal if e.kind == "tool"}
    assert tools[0]["args"] == ACME and tools[0]["result"] == "paid 1500 to ACME"
    assert (
        tools[1]["args"] == GLOBEX and "denied by a reviewer (U1): too much" in tools[1]["result"]
    )


def test_each_decision_reaches_its_own_call_whatever_thread_ran_first(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ACME call reaches the hooks last on the first execution and first on resume;
    the decisions must still follow the calls (a seq per thread arrival would swap them)."""
    original = agent_executor.run_before_tool_call_hooks
    globex_seen = threading.Event()

    def acme_last(context: Any) -> Any:
        if context.tool_input.get("to") == "ACME":
            globex_seen.wait(timeout=10)
            time.sleep(0.05)
        elif context.tool_input.get("to") == "GLOBEX":
            globex_seen.set()
        return original(context)

    monkeypatch.setattr(agent_executor, "run_before_tool_call_hooks", acme_last)
    run_id, reviews = _paused(bench)
    assert globex_seen.is_set()
    monkeypatch.setattr(agent_executor, "run_before_tool_call_hooks", original)

    bench.service.decide(reviews["ACME"].id, DecisionKind.REJECT, "not this month", by="U2")
    bench.service.decide(reviews["GLOBEX"].id, DecisionKind.APPROVE, None, by="U2")
    bench.work_here()
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert _paid(bench) == [(2000, "GLOBEX")]
    assert parse_draft(done.output or "").notes == (
        "pay: pay was denied by a reviewer (U2): not this month. It was not run.",
        "pay: paid 2000 to GLOBEX",
    )


@pytest.mark.slow
def test_a_native_turn_recorded_in_one_process_is_replayed_in_another(bench: Bench) -> None:
    run_id, reviews = _paused(bench)
    bench.service.decide(reviews["ACME"].id, DecisionKind.APPROVE, None, by="U1")
    bench.service.decide(reviews["GLOBEX"].id, DecisionKind.REJECT, "too much", by="U1")

    pid = bench.work()

    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert _paid(bench) == [(1500, "ACME")]
    assert "pay: pay was denied by a reviewer (U1): too much. It was not run." in (
        done.output or ""
    )
    # The other process got the tool-call turn from the journal as plain JSON, and only
    # the final turn from its model.
    calls = bench.llm_calls()
    assert [(c["pid"], c["reply_kind"]) for c in calls][1:] == [(pid, "final")]
    assert len(calls) == 2


def test_a_held_call_is_never_shown_to_the_model_if_its_turn_is_not_counted_out(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another hook blocks GLOBEX before Countersign's hooks see it, so the turn never looks
    complete to them; the run must still pause before the model sees ACME's placeholder."""
    original = agent_executor.run_before_tool_call_hooks

    def block_globex(context: Any) -> Any:
        if context.tool_input.get("to") == "GLOBEX":
            return True  # blocked by someone else's hook: ours never run for this call
        return original(context)

    monkeypatch.setattr(agent_executor, "run_before_tool_call_hooks", block_globex)
    run = bench.start("parallel_payments", sequential="yes")
    bench.work_here()

    assert bench.run(run.id).status == RunStatus.WAITING, bench.run(run.id).error
    assert set(_reviews(bench, run.id)) == {"ACME"}
    assert [c["reply_kind"] for c in bench.llm_calls()] == ["tool_calls"]
    assert bench.effects("paid") == []
