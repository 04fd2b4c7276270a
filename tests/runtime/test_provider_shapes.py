"""Each provider's own response shape is replayed as it was: Anthropic and Gemini native, and
the LiteLLM path, against local stand-ins of their APIs (``tests/support/provider_standins.py``; the
OpenAI provider's rows are in ``tests/runtime/test_providers.py``).

Every test pauses in one ``countersign worker`` process and resumes in others: a gated call
edited by the reviewer runs once, with the edit (on Gemini it never ran: the tool-call turn
was replayed as a dict CrewAI does not read, and the run said ``succeeded``); a reviewed task
revised; a question answered; streamed and not; a worker killed while a request is in flight.
What the stand-in was asked is checked too: no question asked twice, nothing refused.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
from sqlalchemy import select, update

from crew_runtime.offline.drafts import parse_draft
from storage import ReviewKind, RunStatus
from storage.schema import journal
from tests.support.harness import ON_SQLITE, Bench
from tests.support.openai_standin import ModelScript, OpenAIStandIn
from tests.support.provider_crews import CONFIG, PLAN
from tests.support.provider_standins import AnthropicStandIn, GeminiStandIn, StandIn

pytestmark = [pytest.mark.slow, ON_SQLITE]

SCRIPTS = {
    name: ModelScript(label="Report", tool_plan=PLAN)
    for name in ("claude-sonnet-4-5", "gemini-2.0-flash", "gpt-4o-mini")
}
MODELS = {"anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.0-flash", "litellm": "gpt-4o-mini"}


class _LiteLLM:
    """The OpenAI stand-in, seen as the others are (``asked``, ``problems``, ``env``)."""

    def __init__(self) -> None:
        self.server = OpenAIStandIn(SCRIPTS)

    def asked(self) -> list[str]:
        return [r.conversation() for r in self.server.requests()]

    @property
    def problems(self) -> list[str]:
        return self.server.problems

    def env(self) -> dict[str, str]:
        # LiteLLM fetches its model price list from the network unless told not to.
        return self.server.env() | {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> Iterator[tuple[str, StandIn | _LiteLLM]]:
    name = request.param
    if name == "litellm":
        litellm = _LiteLLM()
        with litellm.server:
            yield name, litellm
        return
    standin = AnthropicStandIn(SCRIPTS) if name == "anthropic" else GeminiStandIn(SCRIPTS)
    with standin:
        yield name, standin


@pytest.fixture
def providers(bench: Bench) -> Bench:
    bench.add_crews(CONFIG)
    return bench


def _asked(standin: StandIn | _LiteLLM) -> list[str]:
    if isinstance(standin, _LiteLLM):
        return standin.asked()
    return [a.conversation() for a in standin.asked()]


def _work(bench: Bench, standin: StandIn | _LiteLLM, *args: str) -> int:
    """One worker process until idle; how many requests it made."""
    before = len(_asked(standin))
    bench.work(*args, **standin.env())
    return len(_asked(standin)) - before


def _asked_once(standin: StandIn | _LiteLLM) -> None:
    assert standin.problems == []
    asked = _asked(standin)
    assert len(asked) == len(set(asked)), "a recorded turn was sent to the model again"


def _notes(output: str | None) -> tuple[str, ...]:
    return parse_draft(output or "").notes


@pytest.mark.parametrize(
    ("provider", "stream"),
    [
        ("anthropic", "no"),
        ("anthropic", "yes"),
        ("gemini", "no"),
        ("gemini", "yes"),
        ("litellm", "no"),
    ],
    ids=["anthropic", "anthropic-streamed", "gemini", "gemini-streamed", "litellm"],
    indirect=["provider"],
)
def test_an_edited_gated_call_a_revision_and_a_question_on_each_provider(
    providers: Bench, provider: tuple[str, StandIn | _LiteLLM], stream: str
) -> None:
    bench = providers
    name, standin = provider
    inputs = {"topic": "otters", "provider": name, "model": MODELS[name], "stream": stream}
    payment = bench.start("provider_payments", **inputs)
    writer = bench.start("provider_writer", **inputs)
    research = bench.start("provider_research", **inputs)

    assert _work(bench, standin) == 4  # pay (held) | the outline | search, ask_human
    assert bench.pending(payment.id).kind == ReviewKind.TOOL_APPROVAL
    assert bench.pending(writer.id).kind == ReviewKind.TASK_REVIEW
    assert bench.pending(research.id).kind == ReviewKind.QUESTION
    bench.decide(payment.id, "edit", '{"amount": 900, "to": "ACME"}')
    bench.decide(writer.id, "changes", "shorter please")
    bench.decide(research.id, "answer", "casual")
    assert _work(bench, standin) == 4  # the receipt | the revised outline | publish, report
    bench.decide(writer.id, "approve")
    assert _work(bench, standin) == 1  # the article
    bench.decide(writer.id, "approve")
    assert _work(bench, standin) == 0

    done = {run.id: bench.run(run.id) for run in (payment, writer, research)}
    for run in done.values():
        assert run.status == RunStatus.SUCCEEDED, run.error
        assert run.divergence is None
    assert [(e["amount"], e["to"]) for e in bench.effects("paid")] == [(900, "ACME")]
    (paid,) = [n for n in _notes(done[payment.id].output) if n.startswith("pay:")]
    assert paid.startswith("pay: paid 900 to ACME\n\nNote: a reviewer (U1) changed")
    outline = parse_draft(parse_draft(done[writer.id].output or "").context or "")
    assert outline.feedback == ("shorter please",) and outline.saw_previous_draft
    assert "ask_human: casual" in _notes(done[research.id].output)
    assert len(bench.effects("published")) == 1
    _asked_once(standin)


@pytest.mark.parametrize("name", ["anthropic", "gemini"])
def test_a_worker_killed_while_the_provider_is_answering(providers: Bench, name: str) -> None:
    """SIGKILL while the turn after an approved payment is in flight: the next worker asks
    that turn again (it was never journaled), pays nothing more, and the run succeeds."""
    bench = providers
    standin = AnthropicStandIn(SCRIPTS) if name == "anthropic" else GeminiStandIn(SCRIPTS)
    with standin:
        run = bench.start("provider_payments", topic="otters", provider=name, model=MODELS[name])
        assert _work(bench, standin) == 1
        bench.decide(run.id, "approve")
        standin.hold(1)  # the receipt's request, after the payment ran
        worker = bench.spawn(**standin.env())
        assert standin.holding.wait(90), "the worker never asked for the receipt"
        os.kill(worker.pid, signal.SIGKILL)
        worker.communicate(timeout=30)
        assert worker.returncode == -signal.SIGKILL
        standin.release()
        assert len(bench.effects("paid")) == 1
        bench.work("--lease", "0.5", **standin.env())
        done = bench.run(run.id)
        assert done.status == RunStatus.SUCCEEDED, done.error
        assert done.divergence is None
        assert len(bench.effects("paid")) == 1
        assert "pay: paid 1500 to ACME" in _notes(done.output)
        asked = [a.conversation() for a in standin.asked()]
        assert len(asked) == 3 and asked[1] == asked[2]  # only the killed turn, asked again
        assert standin.problems == []


def test_a_replayed_turn_crewai_cannot_read_fails_the_run(providers: Bench) -> None:
    """A tool-call turn whose class this worker cannot rebuild (its SDK missing) fails the
    run with the reason; it never ends the task as if the model had answered."""
    bench = providers
    with GeminiStandIn(SCRIPTS) as standin:
        run = bench.start(
            "provider_payments", topic="otters", provider="gemini", model=MODELS["gemini"]
        )
        assert _work(bench, standin) == 1
        with bench.store.engine.begin() as db:
            rows = db.execute(select(journal).where(journal.c.run_id == run.id)).all()
            (turn,) = [row for row in rows if "classes" in row.payload]
            assert turn.payload["classes"] == ["google.genai.types:Part"]
            changed = turn.payload | {"classes": ["google.genai.types:NoSuchPart"]}
            where = (journal.c.run_id == run.id) & (journal.c.pos == turn.pos)
            db.execute(update(journal).where(where).values(payload=changed))
        bench.decide(run.id, "approve")
        assert _work(bench, standin) == 0
        failed = bench.run(run.id)
        assert failed.status == RunStatus.FAILED
        assert failed.error is not None and "google.genai.types:NoSuchPart" in failed.error
        assert bench.effects("paid") == []


@pytest.mark.parametrize("provider", ["litellm"], indirect=True)
def test_streamed_tool_calls_on_the_litellm_path_fail_as_on_plain_crewai(
    providers: Bench, provider: tuple[str, StandIn | _LiteLLM]
) -> None:
    """CrewAI's LiteLLM path drops a streamed tool call's id (crewai/llm.py rebuilds each call
    from its name and arguments), and OpenAI refuses the next request, whose tool call has
    ``"id": null``. Plain CrewAI fails there; so does the run, with CrewAI's error as its
    reason (never a success)."""
    bench = providers
    name, standin = provider
    run = bench.start("provider_research", topic="otters", provider=name, stream="yes")
    _work(bench, standin)
    failed = bench.run(run.id)
    assert failed.status == RunStatus.FAILED
    assert failed.error is not None and "Failed to get streaming response" in failed.error
    assert "a tool call needs id" in failed.error
