"""Crews on CrewAI's real OpenAI provider pause in one worker process and resume in another.

The model is ``LLM(model="openai/...")``, CrewAI's native OpenAI provider, talking HTTP to
the stand-in (``tests/support/openai_standin.py``), which the workers reach through
``OPENAI_BASE_URL``. What the stand-in received is what the model was asked: each question
once (a replay reads the journal and asks nothing again), every tool call id in a
conversation one the model really gave (ids are random, so a re-asked turn would show),
nothing refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crew_runtime.offline.drafts import parse_draft
from storage import ReviewKind, RunStatus
from tests.support.harness import ON_SQLITE, ROOT, Bench
from tests.support.openai_standin import ChatRequest, OpenAIStandIn
from tests.support.provider_crews import CONFIG, SCRIPTS

pytestmark = [pytest.mark.slow, ON_SQLITE]

PROJECT_SRC = Path(__file__).resolve().parents[1] / "crewbase_project" / "src"


@pytest.fixture
def openai() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn(SCRIPTS) as standin:
        yield standin


@pytest.fixture
def providers(bench: Bench) -> Bench:
    bench.add_crews(CONFIG)
    return bench


def _work(bench: Bench, openai: OpenAIStandIn, *args: str, **env: str) -> list[ChatRequest]:
    """One worker process until idle; the requests it made."""
    before = len(openai.requests())
    bench.work(*args, **openai.env(), **env)
    return openai.requests()[before:]


def _each_question_asked_once(openai: OpenAIStandIn) -> None:
    """No request repeats an earlier one, every tool call the conversations carry is one the
    stand-in made (with its id), and nothing was refused."""
    assert openai.problems == []
    asked = [request.conversation() for request in openai.requests()]
    assert len(asked) == len(set(asked)), "a recorded turn was sent to the model again"
    given: dict[str, str] = {}
    for request in openai.requests():
        for message in request.messages:
            for call in message.get("tool_calls") or []:
                assert given.get(call["id"]) == json.dumps(call["function"], sort_keys=True), (
                    f"tool call {call['id']} is not one the model made"
                )
        for call in (request.answer or {}).get("tool_calls") or []:
            given[call["id"]] = json.dumps(call["function"], sort_keys=True)


def _journal_holds_whole_answers(bench: Bench, openai: OpenAIStandIn, *run_ids: str) -> None:
    """Every LLM turn journaled is an answer the model gave, whole (streamed ones joined from
    their pieces): tool calls with their ids, names and arguments; text as sent, or cut at
    CrewAI's stop word when it ran on."""
    given = set()
    for request in openai.requests():
        answer = request.answer or {}
        calls = answer.get("tool_calls") or []
        if calls:
            given.add(json.dumps([_call(c) for c in calls]))
        else:
            given.update({answer["content"], answer["content"].split("\nObservation:")[0]})
    for run_id in run_ids:
        for entry in bench.store.load_journal(run_id):
            if entry.kind == "llm":
                payload = entry.payload
                turn = payload.get("text") or json.dumps([_call(c) for c in payload["data"]])
                assert turn in given, f"{entry.stream} turn {entry.seq} is not what the model said"


def _call(call: dict[str, Any]) -> list[str]:
    return [call["id"], call["function"]["name"], call["function"]["arguments"]]


def _notes(output: str | None) -> tuple[str, ...]:
    return parse_draft(output or "").notes


@pytest.mark.parametrize(
    ("model", "stream"),
    [("gpt-4o-mini", "no"), ("gpt-4o-mini", "yes"), ("o1-mini", "no")],
    ids=["native-tools", "native-tools-streamed", "react-text"],
)
def test_questions_gates_and_reviews_on_the_real_provider(
    providers: Bench, openai: OpenAIStandIn, model: str, stream: str
) -> None:
    bench = providers
    inputs = {"topic": "otters", "model": model, "stream": stream}
    research = bench.start("provider_research", **inputs)
    payment = bench.start("provider_payments", **inputs)
    writer = bench.start("provider_writer", **inputs)

    # search, ask_human | pay (held) | the outline's draft
    assert len(_work(bench, openai)) == 4
    assert bench.pending(research.id).kind == ReviewKind.QUESTION
    assert bench.pending(payment.id).kind == ReviewKind.TOOL_APPROVAL
    assert bench.pending(writer.id).kind == ReviewKind.TASK_REVIEW
    assert bench.effects("search") and not bench.effects("paid")
    bench.decide(research.id, "answer", "casual")
    bench.decide(payment.id, "approve")
    bench.decide(writer.id, "changes", "shorter please")
    # publish, the report | the receipt | the revised outline
    assert len(_work(bench, openai)) == 4
    bench.decide(writer.id, "approve")
    assert len(_work(bench, openai)) == 1  # the article
    bench.decide(writer.id, "approve")
    assert _work(bench, openai) == []

    done = {run.id: bench.run(run.id) for run in (research, payment, writer)}
    assert {r.status for r in done.values()} == {RunStatus.SUCCEEDED}
    assert {r.divergence for r in done.values()} == {None}
    assert "ask_human: casual" in _notes(done[research.id].output)
    assert "pay: paid 1500 to ACME" in _notes(done[payment.id].output)
    outline = parse_draft(parse_draft(done[writer.id].output or "").context or "")
    assert outline.feedback == ("shorter please",) and outline.saw_previous_draft
    assert len(bench.effects("search")) == 1
    assert len(bench.effects("published")) == 1
    assert len(bench.effects("paid")) == 1
    _each_question_asked_once(openai)
    _journal_holds_whole_answers(bench, openai, research.id, payment.id, writer.id)

    requests = openai.requests()
    assert {r.stream for r in requests} == {stream == "yes"}
    # CrewAI calls tools natively on a model it knows can (gpt-4o-mini), in ReAct text on
    # one it knows cannot (o1-mini), whose replies ran on past each action: cut by CrewAI,
    # never shown to the model again.
    offered_tools = {r.tools is not None for r in requests}  # the writer's agents have none
    assert offered_tools == ({True, False} if model == "gpt-4o-mini" else {False})
    assert not any("invented" in json.dumps(r.messages) for r in requests)


def test_a_streaming_crew_runs_with_its_models_streaming(
    providers: Bench, openai: OpenAIStandIn
) -> None:
    """``Crew(stream=True)``: ``kickoff()`` hands back an iterator and runs nothing until it is
    read; the worker runs the crew, its models streaming as CrewAI has them stream."""
    bench = providers
    run = bench.start("provider_research", topic="otters", crew_stream="yes")
    assert len(_work(bench, openai)) == 2
    assert bench.pending(run.id).kind == ReviewKind.QUESTION
    bench.decide(run.id, "answer", "formal")
    assert len(_work(bench, openai)) == 2
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert "ask_human: formal" in _notes(done.output)
    assert {r.stream for r in openai.requests()} == {True}
    assert len(bench.effects("published")) == 1
    _each_question_asked_once(openai)


@pytest.mark.parametrize("structured", ["task", "llm"])
def test_a_structured_answer_is_replayed_as_the_model_it_was(
    providers: Bench, openai: OpenAIStandIn, structured: str
) -> None:
    """Structured output, asked for by the task (``output_pydantic``) or by the model
    (``LLM(response_format=...)``): the provider answers with a pydantic object, and a replay
    must hand back one too (CrewAI parses anything else as text)."""
    bench = providers
    run = bench.start("provider_writer", topic="otters", structured=structured)
    (asked,) = _work(bench, openai)
    assert asked.body["response_format"]["type"] == "json_schema"
    bench.decide(run.id, "approve")
    assert len(_work(bench, openai)) == 1  # the article; the outline was replayed
    article = bench.pending(run.id)
    assert article.stream == "task1:Editor"
    outline = json.loads(parse_draft(article.prompt).context or "")
    assert outline["sections"] == 0
    assert parse_draft(outline["headline"]).subject == "Outline otters"
    bench.decide(run.id, "approve")
    assert _work(bench, openai) == []
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.divergence is None
    _each_question_asked_once(openai)


def test_a_crewbase_project_as_crewai_creates_it(bench: Bench, openai: OpenAIStandIn) -> None:
    """``@CrewBase`` with YAML config, ``@llm``/``@tool``/``@before_kickoff`` methods, named in
    countersign.toml by its module (``src/`` on the path, as an installed project has it)."""
    bench.add_crews('[crews.newsroom]\nfactory = "newsroom.crew:factory"\n')
    path = os.pathsep.join([str(ROOT), str(PROJECT_SRC)])
    run = bench.start("newsroom", topic="otters")
    assert len(_work(bench, openai, PYTHONPATH=path)) == 2  # search, ask_human
    question = bench.pending(run.id)
    # The role as CrewAI has it, from the YAML: a folded scalar (">") ends with a newline.
    assert (question.kind, question.stream) == (ReviewKind.QUESTION, "task0:Science Researcher\n")
    bench.decide(run.id, "answer", "the sea otters")
    resumed = _work(bench, openai, PYTHONPATH=path)
    assert len(resumed) == 2  # the notes, the report (streamed: the @llm method's model)
    assert [r.stream for r in resumed] == [False, True]
    report = bench.pending(run.id)
    assert (report.kind, report.stream) == (ReviewKind.TASK_REVIEW, "task1:Science Editor\n")
    notes = parse_draft(parse_draft(report.prompt).context or "").notes
    assert notes == (
        "search: 3 facts about Research otters for the Science desk",
        "ask_human: the sea otters",
    )
    bench.decide(run.id, "approve")
    assert _work(bench, openai, PYTHONPATH=path) == []
    done = bench.run(run.id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    assert done.output == report.prompt
    assert len(bench.effects("search")) == 1
    _each_question_asked_once(openai)


def test_one_run_per_input_where_kickoff_for_each_would_loop(
    providers: Bench, openai: OpenAIStandIn
) -> None:
    """``kickoff_for_each(inputs=[...])`` is one Countersign run per input: they pause and
    resume on their own, side by side in one worker process, each with its own answers."""
    bench = providers
    topics = ["otters", "beavers", "herons", "newts"]
    runs = {topic: bench.start("provider_research", topic=topic) for topic in topics}
    assert len(_work(bench, openai, "--concurrency", "2")) == 8
    for topic, run in runs.items():
        question = bench.pending(run.id)
        assert question.prompt == f"Formal or casual tone for Research {topic}?"
        bench.decide(run.id, "answer", f"casual for {topic}")
    assert len(_work(bench, openai, "--concurrency", "2")) == 8
    for topic, run in runs.items():
        done = bench.run(run.id)
        assert done.status == RunStatus.SUCCEEDED, done.error
        searched, answered, published = _notes(done.output)
        assert searched == f"search: 3 facts about Research {topic}"
        assert answered == f"ask_human: casual for {topic}"
        assert published == f"publish: published {len(f'Report on Research {topic}')} characters"
    searched = sorted(e["query"] for e in bench.effects("search"))
    assert searched == sorted(f"Research {topic}" for topic in topics)
    assert len(bench.effects("published")) == len(topics)
    _each_question_asked_once(openai)
