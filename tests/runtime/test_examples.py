"""The example crews in ``examples/``, driven end to end through the real runtime.

They run as a newcomer runs them: the shipped ``examples/countersign.toml``, no model
configured (so the offline scripted model, through the real CrewAI loop), a worker in this
process, decisions through the service. ``COUNTERSIGN_LLM`` is only checked for what the
factories build: calling a real model would need the network.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crewai.llms.base_llm import BaseLLM

from crew_runtime import Countersign, load_config
from crew_runtime.executor import build_crew, uses_offline_model
from crew_runtime.offline.scripted_llm import ScriptedLLM
from storage import OutboxKind, ReviewKind, RunStatus
from tests.support.harness import ROOT, Bench

EXAMPLES = ROOT / "examples"
TOPIC = "durable agents"


class ExampleBench(Bench):
    """The harness's bench on the shipped example configuration."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.config = load_config(EXAMPLES / "countersign.toml")
        self.service = Countersign(self.store, self.config)


@pytest.fixture
def examples(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ExampleBench]:
    monkeypatch.delenv("COUNTERSIGN_LLM", raising=False)
    monkeypatch.setenv("COUNTERSIGN_OUTBOX_FILE", str(tmp_path / "sent.jsonl"))
    made = ExampleBench(tmp_path, db_url)
    yield made
    made.close()


def sent(bench: Bench) -> list[dict[str, Any]]:
    path = bench.tmp / "sent.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_the_example_configuration_documents_each_crew() -> None:
    config = load_config(EXAMPLES / "countersign.toml")
    assert sorted(config.crews) == ["outreach", "research", "writer"]
    assert all(spec.description for spec in config.crews.values())
    assert config.get("writer").required_inputs == ("topic",)
    assert config.get("outreach").required_inputs == ("to", "topic")


def test_writer_revises_the_outline_with_feedback_then_writes_the_article(
    examples: ExampleBench,
) -> None:
    run = examples.start("writer", topic=TOPIC)
    examples.work_here()
    first = examples.pending(run.id).prompt
    assert first.startswith("Outline (version 1)\n\nWorking title: durable agents, in practice")
    assert "feedback" not in first

    examples.decide(run.id, "changes", "add a section on costs")
    examples.work_here()
    second = examples.pending(run.id).prompt
    assert second.startswith(
        "Outline (version 2)\nRevised after your feedback:\n✓ add a section on costs\n\n"
    )
    assert "Working title: durable agents, in practice\n\n1. The problem" in second

    examples.decide(run.id, "approve")
    examples.work_here()
    article = examples.pending(run.id).prompt
    assert article.startswith("Article (version 1)\n\ndurable agents\n")
    assert article.endswith('Built on: "Outline (version 2)"')

    examples.decide(run.id, "approve")
    examples.work_here()
    done = examples.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == article
    notes = [m for m in examples.store.due_outbox() if m.kind == OutboxKind.RUN_NOTE]
    assert [m.payload for m in notes] == [{"note": "offline_model"}]  # once, over 4 executions


def test_research_asks_who_the_brief_is_for_and_writes_it_for_them(
    examples: ExampleBench,
) -> None:
    run = examples.start("research", topic=TOPIC)
    examples.work_here()
    question = examples.pending(run.id)
    assert question.kind == ReviewKind.QUESTION
    assert question.prompt == (
        "Who will read this brief on durable agents, and what should it focus on?"
    )

    examples.decide(run.id, "answer", "platform engineers; focus on failure recovery")
    examples.work_here()
    done = examples.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    brief = done.output or ""
    assert brief.startswith("Brief (version 1)\n\nBrief: durable agents\n\n")
    assert "Written for: platform engineers; focus on failure recovery" in brief
    assert '• search: 3 results for "durable agents"' in brief


def _paused_email(bench: ExampleBench) -> str:
    run = bench.start("outreach", to="ada@example.com", topic=TOPIC)
    bench.work_here()
    review = bench.pending(run.id)
    assert review.kind == ReviewKind.TOOL_APPROVAL
    assert review.details.tool == "send_email"
    assert review.details.args["to"] == "ada@example.com"
    assert review.details.args["subject"] == "A short note on durable agents"
    assert sent(bench) == []
    return run.id


def test_outreach_sends_the_approved_email_once(examples: ExampleBench) -> None:
    run_id = _paused_email(examples)
    examples.decide(run_id, "approve")
    examples.work_here()
    done = examples.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    (email,) = sent(examples)
    assert email["to"] == "ada@example.com"
    assert email["subject"] == "A short note on durable agents"
    assert email["key"].startswith(run_id)
    assert 'send_email: Sent to ada@example.com: "A short note on durable agents"' in (
        done.output or ""
    )


def test_outreach_sends_the_email_as_the_reviewer_edited_it(examples: ExampleBench) -> None:
    run_id = _paused_email(examples)
    args = dict(examples.pending(run_id).details.args)
    args["body"] = "Hi Ada,\n\nShort version: can we talk on Tuesday?\n\nBest"
    examples.decide(run_id, "edit", json.dumps(args), by="U_EDITOR")
    examples.work_here()
    assert examples.run(run_id).status == RunStatus.SUCCEEDED
    (email,) = sent(examples)
    assert email["body"] == args["body"]


def test_outreach_denied_sends_nothing_and_says_why(examples: ExampleBench) -> None:
    run_id = _paused_email(examples)
    examples.decide(run_id, "reject", "not this week", by="U_LEAD")
    examples.work_here()
    done = examples.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error  # a denial is news for the model
    assert sent(examples) == []
    assert "send_email was denied by a reviewer (U_LEAD): not this week" in (done.output or "")


def test_the_outbox_file_sends_each_key_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    deliver = importlib.import_module("example_crews").deliver
    outbox = tmp_path / "sent.jsonl"
    message = {"to": "ada@example.com", "subject": "Hi", "body": "Hello"}
    assert deliver(outbox, "run_1/task0:manager/0", message)
    assert not deliver(outbox, "run_1/task0:manager/0", message)
    assert deliver(outbox, "run_2/task0:manager/0", message)
    assert len(outbox.read_text().splitlines()) == 2


@pytest.mark.parametrize(
    ("crew", "inputs"),
    [
        ("writer", {"topic": TOPIC}),
        ("research", {"topic": TOPIC}),
        ("outreach", {"to": "ada@example.com", "topic": TOPIC}),
    ],
)
def test_countersign_llm_puts_every_agent_on_that_model(
    examples: ExampleBench,
    monkeypatch: pytest.MonkeyPatch,
    crew: str,
    inputs: dict[str, str],
) -> None:
    run = examples.start(crew, **inputs)
    offline = build_crew(examples.config, run)
    assert uses_offline_model(offline)
    assert all(isinstance(agent.llm, ScriptedLLM) for agent in offline.agents)

    monkeypatch.setenv("COUNTERSIGN_LLM", "openai/gpt-4o-mini")
    online = build_crew(examples.config, run)
    assert not uses_offline_model(online)
    for agent in online.agents:
        assert isinstance(agent.llm, BaseLLM) and not isinstance(agent.llm, ScriptedLLM)
        assert (agent.llm.provider, agent.llm.model) == ("openai", "gpt-4o-mini")
