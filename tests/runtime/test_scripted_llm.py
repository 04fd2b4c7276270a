"""The scripted LLM, driven through real CrewAI crews (the agent loop is what it stands in for).

Each crew test runs the real ReAct loop, tool usage and human_input machinery of crewai 1.15.30;
only the provider is scripted. The pure tests pin the reply rules on hand-written conversations.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# CrewAI calls home unless told not to; set before anything imports it.
for _key, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
    "CREWAI_STORAGE_DIR": "countersign-tests",
}.items():
    os.environ.setdefault(_key, _value)

import pytest  # noqa: E402
from crewai import Agent, Crew, Process, Task  # noqa: E402
from crewai.core.providers.human_input import (  # noqa: E402
    SyncHumanInputProvider,
    reset_provider,
    set_provider,
)
from crewai.tools import BaseTool  # noqa: E402
from crewai.utilities.agent_utils import is_tool_call_list  # noqa: E402
from pydantic import BaseModel, Field, PrivateAttr  # noqa: E402

from crew_runtime.journal_llm import decode_response, encode_response  # noqa: E402
from crew_runtime.offline.conversation import prompt_sha256  # noqa: E402
from crew_runtime.offline.drafts import parse_draft  # noqa: E402
from crew_runtime.offline.script import script_reply  # noqa: E402
from crew_runtime.offline.scripted_llm import LOG_ENV_VAR, ScriptedLLM  # noqa: E402

SYSTEM_WITH_SEARCH = (
    "You are Writer.\nTool Name: search\nTool Arguments: {}\nTool Description: Search.\n"
)
TASK_PROMPT = (
    "\nCurrent Task: Outline a post about otters\nKeep it short\n\n"
    "This is the expected criteria for your final answer: an outline\n"
    "you MUST return the actual complete content as the final answer, not a summary."
    "\n\nBegin! This is VERY important to you, use the tools available and give your best "
    "Final Answer, your job depends on it!\n\nThought:"
)


def feedback(text: str) -> dict[str, str]:
    return {
        "role": "user",
        "content": f"User feedback: {text}\nInstructions: Use this feedback to enhance the "
        "next output iteration.\nNote: Do not respond or add commentary.",
    }


def observation(tool: str, args: str, result: str) -> dict[str, str]:
    return {
        "role": "assistant",
        "content": f"Thought: go\nAction: {tool}\nAction Input: {args}\nObservation: {result}",
    }


class SearchTool(BaseTool):
    """Records what it was asked, so tests see the real tool invocations."""

    name: str = "search"
    description: str = "Search for facts about a query."
    invocations: list[str] = Field(default_factory=list)

    def _run(self, query: str) -> str:
        self.invocations.append(query)
        return f"3 facts about {query}"


class RecordingLLM(ScriptedLLM):
    """Keeps a copy of every conversation it was sent, and what it replied."""

    _seen: list[tuple[list[dict[str, Any]], str]] = PrivateAttr(default_factory=list)

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        reply = super().call(messages, *args, **kwargs)
        snapshot = [dict(m) for m in messages] if isinstance(messages, list) else messages
        self._seen.append((snapshot, reply))
        return reply


class ScriptedFeedback(SyncHumanInputProvider):
    """A reviewer who types the given replies in order; "" approves."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)

    def _prompt_input(self, crew: Any) -> str:  # type: ignore[override]
        return self.replies.pop(0)


class DraftKeepingFeedback(ScriptedFeedback):
    """Like the runtime's provider: puts the previous draft back before the feedback."""

    def _handle_regular_feedback(
        self, current_answer: Any, initial_feedback: str, context: Any
    ) -> Any:
        answer, text = current_answer, initial_feedback
        while text.strip():
            context.messages.append({"role": "assistant", "content": answer.text})
            context.messages.append(context._format_feedback_message(text))
            answer = context._invoke_loop()
            text = self._prompt_input(context.crew)
        context.ask_for_human_input = False
        return answer


@contextmanager
def human_input(provider: SyncHumanInputProvider) -> Iterator[None]:
    token = set_provider(provider)
    try:
        yield
    finally:
        reset_provider(token)


def writer(llm: ScriptedLLM) -> Agent:
    return Agent(role="Writer", goal="Write well", backstory="A writer.", llm=llm, verbose=False)


def outline_task(agent: Agent, tool: SearchTool | None, *, human: bool = False) -> Task:
    return Task(
        description="Outline a post about {topic}\nKeep it short",
        expected_output="an outline",
        agent=agent,
        tools=[tool] if tool else [],
        human_input=human,
    )


def run(agent: Agent, *tasks: Task) -> list[str]:
    crew = Crew(agents=[agent], tasks=list(tasks), process=Process.sequential, verbose=False)
    result = crew.kickoff(inputs={"topic": "otters"})
    return [output.raw for output in result.tasks_output]


# --- through a real crew -----------------------------------------------------------------


def test_tool_plan_runs_through_the_real_agent_loop() -> None:
    llm = ScriptedLLM(
        model="scripted/writer", label="Outline", tool_plan=[("search", {"query": "{subject}"})]
    )
    search = SearchTool()
    agent = writer(llm)

    [raw] = run(agent, outline_task(agent, search))

    assert search.invocations == ["Outline a post about otters"]
    draft = parse_draft(raw)
    assert draft.label == "Outline"
    assert draft.revision == 0
    assert draft.subject == "Outline a post about otters"
    assert draft.notes == ("search: 3 facts about Outline a post about otters",)
    assert draft.context is None
    assert llm.calls == 2  # the action, then the final answer


def test_second_task_gets_the_first_output_as_context_and_skips_unoffered_tools() -> None:
    llm = ScriptedLLM(
        model="scripted/writer", label="Outline", tool_plan=[("search", {"query": "otters"})]
    )
    search = SearchTool()
    agent = writer(llm)
    article = Task(description="Write the article", expected_output="an article", agent=agent)

    first, second = run(agent, outline_task(agent, search), article)

    assert search.invocations == ["otters"]
    later = parse_draft(second)
    assert later.subject == "Write the article"
    assert later.context == first  # crewai put task 1's output in task 2's prompt
    assert later.notes == ()  # task 2 offers no tools, so the plan is skipped there
    assert llm.calls == 3


def test_human_feedback_rounds_are_listed_in_the_revised_draft() -> None:
    llm = ScriptedLLM(model="scripted/writer", label="Outline")
    agent = writer(llm)

    with human_input(ScriptedFeedback("make it shorter", "add a title", "")):
        [raw] = run(agent, outline_task(agent, None, human=True))

    draft = parse_draft(raw)
    assert draft.revision == 2
    assert draft.feedback == ("make it shorter", "add a title")
    # crewai 1.15.30 drops the previous draft on the ReAct path, and it shows.
    assert draft.saw_previous_draft is False
    assert llm.calls == 3


def test_a_previous_draft_put_back_in_the_conversation_is_seen() -> None:
    llm = ScriptedLLM(model="scripted/writer", label="Outline")
    agent = writer(llm)

    with human_input(DraftKeepingFeedback("make it shorter", "")):
        [raw] = run(agent, outline_task(agent, None, human=True))

    draft = parse_draft(raw)
    assert (draft.revision, draft.feedback, draft.saw_previous_draft) == (
        1,
        ("make it shorter",),
        True,
    )


def test_the_same_conversation_gets_byte_identical_replies() -> None:
    plan = [("search", {"query": "{subject}"})]
    first = RecordingLLM(model="scripted/writer", label="Outline", tool_plan=plan)
    agent = writer(first)
    run(agent, outline_task(agent, SearchTool()))

    second = RecordingLLM(model="scripted/writer", label="Outline", tool_plan=plan)
    agent = writer(second)
    run(agent, outline_task(agent, SearchTool()))

    fresh = ScriptedLLM(model="scripted/other", label="Outline", tool_plan=plan)
    assert len(first._seen) == 2
    for (messages, reply), (messages_again, reply_again) in zip(
        first._seen, second._seen, strict=True
    ):
        assert prompt_sha256(messages) == prompt_sha256(messages_again)
        assert reply.encode() == reply_again.encode()
        assert fresh.reply(messages).text.encode() == reply.encode()
    assert fresh.calls == 0  # reply() is the pure part: no counting, logging or sleeping


def test_every_call_appends_one_log_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv(LOG_ENV_VAR, str(log))
    llm = RecordingLLM(
        model="scripted/writer", label="Outline", tool_plan=[("search", {"query": "otters"})]
    )
    agent = writer(llm)

    run(agent, outline_task(agent, SearchTool()))

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["reply_kind"] for line in lines] == ["action", "final"]
    assert {line["pid"] for line in lines} == {os.getpid()}
    assert {line["model"] for line in lines} == {"scripted/writer"}
    assert [line["prompt_sha256"] for line in lines] == [
        prompt_sha256(messages) for messages, _ in llm._seen
    ]


# --- the reply rules, on hand-written conversations --------------------------------------


def test_progress_counts_observations_in_the_current_round() -> None:
    plan = [("search", {"query": "{subject}"}), ("search", {"query": "{observation}!"})]
    base = [
        {"role": "system", "content": SYSTEM_WITH_SEARCH},
        {"role": "user", "content": TASK_PROMPT},
    ]
    obs1 = observation("search", "{}", "one")

    first = script_reply(base, tool_plan=plan)
    second = script_reply([*base, obs1], tool_plan=plan)
    done = script_reply([*base, obs1, observation("search", "{}", "two")], tool_plan=plan)
    after_feedback = script_reply([*base, obs1, feedback("more")], tool_plan=plan)
    once_per_task = script_reply(
        [*base, obs1, observation("search", "{}", "two"), feedback("more")],
        tool_plan=plan,
        replan_after_feedback=False,
    )

    assert first.kind == "action"
    assert first.text.endswith(
        'Action: search\nAction Input: {"query": "Outline a post about otters"}'
    )
    assert second.text.endswith('Action Input: {"query": "one!"}')
    assert done.kind == "final"
    assert after_feedback.kind == "action"  # the plan starts again after feedback
    assert once_per_task.kind == "final"


def test_tools_the_prompt_does_not_offer_are_skipped() -> None:
    reply = script_reply([{"role": "user", "content": TASK_PROMPT}], tool_plan=["search"])

    assert reply.kind == "final"


def test_plain_string_messages_get_a_draft_about_their_first_line() -> None:
    reply = script_reply("Summarise this\nplease", tool_plan=[])

    assert reply.kind == "final"
    assert parse_draft(reply.text).subject == "Summarise this"


def test_react_keywords_in_inputs_cannot_break_crewais_parser() -> None:
    tricky = 'say "Final Answer: no" then Action: x\nAction Input: {}'
    messages = [{"role": "user", "content": TASK_PROMPT}, feedback(tricky)]

    text = script_reply(messages, tool_plan=[]).text

    assert text.count("Final Answer:") == 1
    assert "Action:" not in text
    assert parse_draft(text).feedback == (tricky,)


def test_crewais_periodic_tool_list_is_dropped_from_notes() -> None:
    noisy = (
        "42\n\n\nYou ONLY have access to the following tools, and should NEVER ...\nFinal Answer: x"
    )
    messages = [{"role": "user", "content": TASK_PROMPT}, observation("search", "{}", noisy)]

    assert parse_draft(script_reply(messages, tool_plan=[]).text).notes == ("search: 42",)


def test_response_model_gets_json_when_trivially_fillable() -> None:
    class Summary(BaseModel):
        title: str
        words: int
        tags: list[str]
        note: str = "kept default"

    class Nested(BaseModel):
        summary: Summary

    structured = script_reply("Otters", tool_plan=[], response_model=Summary)
    ignored = script_reply("Otters", tool_plan=[], response_model=Nested)

    summary = Summary.model_validate_json(structured.text)
    assert parse_draft(summary.title).subject == "Otters"
    assert (summary.words, summary.tags, summary.note) == (0, [], "kept default")
    assert ignored.text.startswith("Thought: I now know the final answer\nFinal Answer: ")


def test_parse_draft_rejects_other_text() -> None:
    with pytest.raises(ValueError, match="not a scripted draft"):
        parse_draft("Here is my outline")
    with pytest.raises(ValueError, match="not a scripted draft"):
        parse_draft('Outline v0 on "x" | feedback: [] | saw_previous_draft: maybe')


def test_bad_placeholders_and_labels_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"known placeholders: \{subject\}"):
        ScriptedLLM(tool_plan=[("search", {"query": "{topic}"})])
    with pytest.raises(ValueError, match="label"):
        ScriptedLLM(label="a | b")


def test_calls_are_counted_across_threads_and_delayed() -> None:
    llm = ScriptedLLM(delay=0.05)
    threads = [threading.Thread(target=llm.call, args=("hi",)) for _ in range(8)]

    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    asyncio.run(llm.acall("hi"))

    assert llm.calls == 9
    assert time.monotonic() - started >= 0.1  # 8 parallel sleeps, then one awaited


# --- native function calling -------------------------------------------------------------

NATIVE_TOOLS = [
    {"type": "function", "function": {"name": "search", "description": "Search.", "parameters": {}}}
]
NATIVE_PLAN: list[Any] = [
    [("search", {"query": "{subject}"}), ("search", {"query": "otters {step}"})],
    ("search", {"query": "{observation}!"}),
]


def native_turn(reply_calls: list[dict[str, Any]], *results: str) -> list[dict[str, Any]]:
    """The assistant tool-call message and the tool results CrewAI appends for a turn."""
    return [
        {"role": "assistant", "content": None, "tool_calls": reply_calls},
        *(
            {"role": "tool", "tool_call_id": call["id"], "name": "search", "content": result}
            for call, result in zip(reply_calls, results, strict=True)
        ),
    ]


def test_native_turns_through_the_real_agent_loop() -> None:
    llm = RecordingLLM(model="scripted/writer", label="Outline", native=True, tool_plan=NATIVE_PLAN)
    search = SearchTool()
    agent = writer(llm)

    [raw] = run(agent, outline_task(agent, search))

    # Both calls of the first turn ran, then the one of the second turn, then the answer.
    assert sorted(search.invocations[:2]) == ["Outline a post about otters", "otters 1"]
    assert search.invocations[2] == "3 facts about otters 1!"
    assert llm.calls == 3
    assert raw == llm._seen[-1][1]  # the native final answer is the bare draft
    assert parse_draft(raw).notes == (
        "search: 3 facts about Outline a post about otters",
        "search: 3 facts about otters 1",
        "search: 3 facts about 3 facts about otters 1!",
    )
    second_prompt = llm._seen[1][0]
    assert [m["role"] for m in second_prompt][-3:] == ["assistant", "tool", "tool"]


def test_native_replies_are_plain_json_tool_calls_with_ids_from_the_conversation() -> None:
    base = [
        {"role": "system", "content": "You are Writer."},
        {"role": "user", "content": TASK_PROMPT},
    ]

    first = script_reply(base, tool_plan=NATIVE_PLAN, tools=NATIVE_TOOLS)
    again = script_reply([dict(m) for m in base], tool_plan=NATIVE_PLAN, tools=NATIVE_TOOLS)
    calls = [dict(c) for c in first.tool_calls]
    second = script_reply(
        [*base, *native_turn(calls, "one", "two")], tool_plan=NATIVE_PLAN, tools=NATIVE_TOOLS
    )
    done = script_reply(
        [*base, *native_turn(calls, "one", "two"), *native_turn(list(second.tool_calls), "x")],
        tool_plan=NATIVE_PLAN,
        tools=NATIVE_TOOLS,
    )

    assert first.kind == "tool_calls"
    digest = prompt_sha256(base)[:16]
    assert calls == [
        {
            "id": f"call_{digest}_0",
            "type": "function",
            "function": {"name": "search", "arguments": '{"query": "Outline a post about otters"}'},
        },
        {
            "id": f"call_{digest}_1",
            "type": "function",
            "function": {"name": "search", "arguments": '{"query": "otters 1"}'},
        },
    ]
    assert again == first  # a pure function of the conversation: same ids in any process
    # What a journal stores (a JSON round trip) is exactly what was returned.
    live = ScriptedLLM(native=True, tool_plan=NATIVE_PLAN).call(base, tools=NATIVE_TOOLS)
    assert live == calls
    assert decode_response(encode_response(live)) == live
    assert is_tool_call_list(calls)
    assert second.kind == "tool_calls"
    assert [c["function"]["arguments"] for c in second.tool_calls] == ['{"query": "two!"}']
    assert second.tool_calls[0]["id"] != calls[0]["id"]
    assert done.kind == "final" and parse_draft(done.text).notes == (
        "search: one",
        "search: two",
        "search: x",
    )


def test_native_mode_without_tools_and_the_default_mode_speak_react() -> None:
    react = ScriptedLLM(tool_plan=NATIVE_PLAN)
    native = ScriptedLLM(tool_plan=NATIVE_PLAN, native=True)
    base = [
        {"role": "system", "content": SYSTEM_WITH_SEARCH},
        {"role": "user", "content": TASK_PROMPT},
    ]

    assert (react.supports_function_calling(), native.supports_function_calling()) == (False, True)
    # No tool schemas passed (CrewAI's ReAct path): text actions, a list item one call a turn.
    assert native.reply(base).text == react.reply(base).text
    assert react.reply(base).text.endswith('Action Input: {"query": "Outline a post about otters"}')
    after_one = react.reply([*base, observation("search", "{}", "one")])
    assert after_one.text.endswith('Action Input: {"query": "otters 2"}')
    assert react.call(base, tools=NATIVE_TOOLS) == react.reply(base).text  # tools ignored


def test_prompt_hash_of_text_messages_is_unchanged_and_native_calls_count() -> None:
    messages = [{"role": "user", "content": TASK_PROMPT}, observation("search", "{}", "one")]
    legacy = json.dumps(
        [{"role": m["role"], "content": m["content"]} for m in messages],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    calls = [
        dict(c) for c in script_reply(messages, tool_plan=["search"], tools=NATIVE_TOOLS).tool_calls
    ]
    other = [{**calls[0], "function": {"name": "search", "arguments": '{"query": "x"}'}}]

    assert prompt_sha256(messages) == hashlib.sha256(legacy.encode()).hexdigest()
    assert prompt_sha256([*messages, *native_turn(calls, "r")]) != prompt_sha256(
        [*messages, *native_turn(other, "r")]
    )


# --- readable drafts ----------------------------------------------------------------------


def test_readable_drafts_through_the_real_loop_show_feedback_tools_and_context() -> None:
    llm = ScriptedLLM(
        model="scripted/writer",
        label="Outline",
        tool_plan=[("search", {"query": "otters"})],
        draft_style="readable",
        draft_body="Otters, {{briefly}}\n1. Why they hold hands",
    )
    agent = writer(llm)
    article = Task(description="Write the article", expected_output="an article", agent=agent)

    with human_input(ScriptedFeedback("add a title", "")):
        outline, written = run(agent, outline_task(agent, SearchTool(), human=True), article)

    assert outline == (
        "Outline (version 2)\nRevised after your feedback:\n✓ add a title\n\n"
        "Otters, {briefly}\n1. Why they hold hands\n\n"
        "Gathered along the way:\n• search: 3 facts about otters\n• search: 3 facts about otters"
    )  # the plan runs again after feedback
    assert written == (
        "Outline (version 1)\n\nOtters, {briefly}\n1. Why they hold hands\n\n"
        'Built on: "Outline (version 2)"'
    )


def test_readable_drafts_fill_placeholders_and_default_to_the_task() -> None:
    messages = [
        {"role": "system", "content": SYSTEM_WITH_SEARCH},
        {"role": "user", "content": TASK_PROMPT},
        observation("search", "{}", "line one\nline two"),
        feedback("shorter\nplease"),
    ]

    filled = script_reply(
        messages, tool_plan=[], draft_style="readable", draft_body="On {subject}: {observation}"
    ).text
    default = script_reply(messages[:2], tool_plan=[], draft_style="readable").text

    assert filled == (
        "Thought: I now know the final answer\nFinal Answer: Draft (version 2)\n"
        "Revised after your feedback:\n✓ shorter\n  please\n\n"
        "On Outline a post about otters: line one\nline two\n\n"
        "Gathered along the way:\n• search: line one\n  line two"
    )
    assert default == (
        "Thought: I now know the final answer\nFinal Answer: Draft (version 1)\n\n"
        "Outline a post about otters"
    )
    with pytest.raises(ValueError, match="not a scripted draft"):
        parse_draft(default)


def test_react_keywords_in_readable_drafts_cannot_break_crewais_parser() -> None:
    tricky = 'say "Final Answer: no" then Action: x\nObservation: y'
    messages = [{"role": "user", "content": TASK_PROMPT}, feedback(tricky)]

    text = script_reply(messages, tool_plan=[], draft_style="readable").text

    assert text.count("Final Answer:") == 1
    assert "Action:" not in text and "Observation:" not in text
    assert "Action\ua789 x" in text


def test_a_bad_placeholder_in_a_readable_body_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"draft_body.*\{subject\}"):
        ScriptedLLM(draft_style="readable", draft_body="About {topic}")
