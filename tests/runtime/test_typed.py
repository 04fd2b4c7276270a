"""Typed task outputs and guardrails under review, across real worker processes.

A reviewed task with ``output_pydantic`` or ``output_json`` is reviewed as its object: the draft
is its model's JSON, an edit must be JSON fitting the model's schema (checked by the service
and the CLI before anything is recorded), and the resumed run's task output is the object the
reviewer approved or typed. A task's guardrails (a function, or a string description: CrewAI's
``LLMGuardrail``, whose model calls are journaled) check every draft before it is reviewed and
every edit after. Each run pauses in one ``countersign worker`` process and resumes in another;
the scripted model logs each live call with its process id and prompt hash.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from crew_runtime.errors import UsageError
from crew_runtime.offline.drafts import parse_draft
from storage import ReviewStatus, RunStatus
from tests.support.harness import Bench
from tests.support.typed_crews import CONFIG, FIRST_ATTEMPT, TODO, Outline

pytestmark = pytest.mark.slow


@pytest.fixture
def typed(bench: Bench) -> Bench:
    bench.add_crews(CONFIG)
    return bench


def _turns(bench: Bench, pid: int) -> list[tuple[str, str]]:
    """The live model calls one worker made: (model, reply kind)."""
    calls = [c for c in bench.llm_calls() if c["pid"] == pid]
    return [
        (c["model"].removeprefix("scripted/").removesuffix("-1"), c["reply_kind"]) for c in calls
    ]


def _no_turn_sent_twice(bench: Bench) -> None:
    hashes = [call["prompt_sha256"] for call in bench.llm_calls()]
    assert len(hashes) == len(set(hashes)), "a recorded turn was sent to the LLM again"


def _outputs(bench: Bench) -> list[dict[str, Any]]:
    """Each TaskOutput of the outline CrewAI settled on (its task callback wrote them)."""
    return [{k: e[k] for k in ("raw", "pydantic", "json")} for e in bench.effects("outline")]


def _article_built_on(bench: Bench, run_id: str) -> str | None:
    done = bench.run(run_id)
    assert done.status == RunStatus.SUCCEEDED, done.error
    return parse_draft(done.output or "").context


def _decide_by_cli(
    bench: Bench, review_id: str, kind: str, text: str
) -> subprocess.CompletedProcess[str]:
    cmd = [*bench.cli_command(), "--config", str(bench.config_path), "--database-url", bench.db_url]
    cmd += ["reviews", "decide", review_id, kind, text, "--by", "alice"]
    return subprocess.run(
        cmd, env=bench.worker_env(), cwd=bench.tmp, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("output", ["pydantic", "json"])
def test_a_typed_draft_is_reviewed_as_json_and_an_edit_must_fit_the_model(
    typed: Bench, output: str
) -> None:
    bench = typed
    run = bench.start("typed", topic="otters", output=output)
    first = bench.work()
    review = bench.pending(run.id)
    drafted = json.loads(review.prompt)
    assert set(drafted) == {"headline", "sections"}
    assert parse_draft(drafted["headline"]).subject == "Outline otters"
    assert review.prompt == json.dumps(drafted, indent=2, ensure_ascii=False)
    assert review.details.output_model == "Outline"
    assert review.details.output_schema == Outline.model_json_schema()

    # Refused by the CLI (exit 2, one line) and the service; nothing is recorded.
    refused = _decide_by_cli(bench, review.id, "edit", "Otters are playful.")
    assert refused.returncode == 2, refused
    assert refused.stderr.strip() == (
        "error: the edited output (Outline): the output must be JSON: "
        "Expecting value (line 1, column 1)"
    )
    with pytest.raises(UsageError, match="sections: 'many' is not of type 'integer'"):
        bench.decide(run.id, "edit", '{"headline": "Otters", "sections": "many"}')
    assert bench.pending(run.id).status == ReviewStatus.PENDING
    assert bench.pending(run.id).decision is None

    edited = {"headline": "Otters at play", "sections": 3}
    decided = _decide_by_cli(bench, review.id, "edit", json.dumps(edited, indent=2))
    assert decided.returncode == 0, decided.stderr
    second = bench.work()
    assert json.loads(_article_built_on(bench, run.id) or "") == edited
    raw = Outline(**edited).model_dump_json()
    if output == "pydantic":
        assert _outputs(bench) == [{"raw": raw, "pydantic": edited, "json": None}]
    else:
        assert _outputs(bench) == [{"raw": raw, "pydantic": None, "json": edited}]
    assert _turns(bench, first) == [("outline", "final")]
    assert _turns(bench, second) == [("article", "final")]
    _no_turn_sent_twice(bench)


def test_approve_and_request_changes_on_a_typed_task(typed: Bench) -> None:
    bench = typed
    run = bench.start("typed", topic="otters")
    first = bench.work()
    bench.decide(run.id, "changes", "shorter, please")
    second = bench.work()
    revised = bench.store.list_reviews(run_id=run.id)[0]
    headline = json.loads(revised.prompt)["headline"]
    assert parse_draft(headline).feedback == ("shorter, please",)
    bench.decide(run.id, "approve")
    third = bench.work()
    approved = json.loads(revised.prompt)
    assert json.loads(_article_built_on(bench, run.id) or "") == approved
    assert _outputs(bench) == [
        {"raw": Outline(**approved).model_dump_json(), "pydantic": approved, "json": None}
    ]
    assert _turns(bench, first) == [("outline", "final")]
    assert _turns(bench, second) == [("outline", "final")]
    assert _turns(bench, third) == [("article", "final")]
    _no_turn_sent_twice(bench)


@pytest.mark.parametrize("native", ["no", "yes"])
def test_a_draft_that_is_not_the_models_json_is_shown_as_text_and_edited_into_it(
    typed: Bench, native: str
) -> None:
    """With tools the model answers in text, not structured output: the reviewer sees the
    text, told it does not fit, and gives the object."""
    bench = typed
    run = bench.start("typed", topic="otters", tools="yes", native=native)
    first = bench.work()
    review = bench.pending(run.id)
    assert parse_draft(review.prompt).notes == ("search: 3 facts about Outline otters",)
    assert review.details.output_problem.startswith("(the output): Invalid JSON")
    edited = {"headline": "Otters, researched", "sections": 2}
    bench.decide(run.id, "edit", json.dumps(edited))
    second = bench.work()
    assert json.loads(_article_built_on(bench, run.id) or "") == edited
    assert _outputs(bench)[0]["pydantic"] == edited
    tool = "tool_calls" if native == "yes" else "action"
    assert _turns(bench, first) == [("outline", tool), ("outline", "final")]
    assert _turns(bench, second) == [("article", "final")]
    assert len(bench.effects("search")) == 1
    _no_turn_sent_twice(bench)


def test_an_edit_the_model_refuses_is_not_taken_and_the_draft_is_reviewed_again(
    typed: Bench,
) -> None:
    """The schema allows a blank headline; the model's validator does not. The resumed run
    reviews the same draft again, saying why, instead of failing."""
    bench = typed
    run = bench.start("typed", topic="otters")
    bench.work()
    review = bench.pending(run.id)
    bench.decide(run.id, "edit", '{"headline": "  ", "sections": 1}')
    second = bench.work()
    again = bench.pending(run.id)
    assert again.id != review.id and again.seq == 1
    assert again.prompt == review.prompt
    assert again.details.refused_edit == (
        "it does not fit Outline: headline: Value error, the headline is blank"
    )
    assert _turns(bench, second) == []
    bench.decide(run.id, "approve")
    bench.work()
    assert json.loads(_article_built_on(bench, run.id) or "") == json.loads(review.prompt)
    _no_turn_sent_twice(bench)


@pytest.mark.parametrize(
    ("guard", "output", "native"),
    [("function", "text", "no"), ("llm", "text", "yes"), ("llm", "pydantic", "no")],
)
def test_a_guardrail_checks_the_draft_before_review_and_the_edit_after(
    typed: Bench, guard: str, output: str, native: str
) -> None:
    bench = typed
    tools = "yes" if native == "yes" else "no"
    run = bench.start(
        "typed", topic="otters", guard=guard, output=output, tools=tools, native=native
    )
    first = bench.work()
    # The first draft failed the guardrail: CrewAI retried the agent with its error, and
    # only the draft that passed is reviewed.
    review = bench.pending(run.id)
    shown = json.loads(review.prompt)["headline"] if output == "pydantic" else review.prompt
    assert FIRST_ATTEMPT in (parse_draft(shown).context or "")
    verdict = [("outline", "verdict")] if guard == "llm" else []
    draft = [("outline", "tool_calls")] if tools == "yes" else []
    draft += [("outline", "final")]
    assert _turns(bench, first) == [*draft, *verdict, *draft, *verdict]

    todo = '{"headline": "TODO: otters", "sections": 1}' if output == "pydantic" else "TODO: otters"
    bench.decide(run.id, "edit", todo)
    second = bench.work()
    again = bench.pending(run.id)
    assert again.seq == 1 and again.prompt == review.prompt
    assert again.details.refused_edit == f"the task's guardrail refused it: {TODO}"
    assert _turns(bench, second) == verdict  # the edit's verdict; the rest is replayed

    fine = '{"headline": "Otters, sourced", "sections": 2}' if output == "pydantic" else "Otters."
    bench.decide(run.id, "edit", fine)
    third = bench.work()
    built_on = _article_built_on(bench, run.id) or ""
    assert (json.loads(built_on) if output == "pydantic" else built_on) == (
        json.loads(fine) if output == "pydantic" else fine
    )
    assert _turns(bench, third) == [*verdict, ("article", "final")]
    assert len(bench.effects("search")) == (2 if tools == "yes" else 0)
    _no_turn_sent_twice(bench)
