"""The OpenAI stand-in answers as OpenAI does and refuses what OpenAI refuses.

Called through CrewAI's own OpenAI provider (what crews use) and through the ``openai`` SDK
(to send what the provider never would). If the stand-in took a malformed request, the
provider tests' "nothing refused" would prove nothing.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai as sdk
import pytest
from crewai import LLM

from crew_runtime.offline.drafts import parse_draft
from tests.support.openai_standin import ModelScript, OpenAIStandIn

SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
TASK = [
    {"role": "system", "content": "You are Researcher."},
    {"role": "user", "content": "\nCurrent Task: Research otters\n\nBegin!"},
]


@pytest.fixture
def standin() -> Iterator[OpenAIStandIn]:
    plan = [("search", {"query": "{subject}"})]
    with OpenAIStandIn({"gpt-4o-mini": ModelScript(label="Notes", tool_plan=plan)}) as server:
        yield server


@pytest.fixture
def client(standin: OpenAIStandIn) -> Iterator[sdk.OpenAI]:
    with sdk.OpenAI(base_url=standin.base_url, api_key="sk-test", max_retries=0) as opened:
        yield opened


def _llm(standin: OpenAIStandIn, **options: Any) -> LLM:
    return LLM(model="openai/gpt-4o-mini", base_url=standin.base_url, api_key="sk-test", **options)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_provider_gets_tool_calls_then_text(standin: OpenAIStandIn, stream: bool) -> None:
    llm = _llm(standin, stream=stream)
    (call,) = llm.call(TASK, tools=[SEARCH])
    info = call if isinstance(call, dict) else call.model_dump()
    assert info["function"] == {"name": "search", "arguments": '{"query": "Research otters"}'}
    asked = standin.requests()[-1]
    assert asked.stream is stream and asked.tools is not None
    assert asked.answer is not None and asked.answer["tool_calls"][0]["id"] == info["id"]
    done = [
        *TASK,
        {"role": "assistant", "content": None, "tool_calls": [_plain(info)]},
        {"role": "tool", "tool_call_id": info["id"], "name": "search", "content": "3 facts"},
    ]
    answer = llm.call(done, tools=[SEARCH])
    assert parse_draft(answer).notes == ("search: 3 facts",)
    assert standin.problems == []


def _plain(call: dict[str, Any]) -> dict[str, Any]:
    return {"id": call["id"], "type": "function", "function": call["function"]}


def test_react_text_is_cut_at_the_stop_sequences_sent(
    standin: OpenAIStandIn, client: sdk.OpenAI
) -> None:
    standin.scripts["gpt-4o-mini"] = ModelScript(
        label="Notes", tool_plan=[("search", {"query": "x"})], runs_on=True
    )
    prompt = [{"role": "system", "content": "You are Researcher.\nTool Name: search"}, TASK[1]]
    ran_on = client.chat.completions.create(model="gpt-4o-mini", messages=prompt)
    assert "\nObservation: (invented by the model)" in (ran_on.choices[0].message.content or "")
    cut = client.chat.completions.create(
        model="gpt-4o-mini", messages=prompt, stop=["\nObservation:"]
    )
    assert (cut.choices[0].message.content or "").endswith('Action Input: {"query": "x"}')


def test_structured_output_answers_an_instance_of_the_schema(client: sdk.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"headline": {"type": "string"}, "sections": {"type": "integer"}},
        "required": ["headline", "sections"],
        "additionalProperties": False,
    }
    answer = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=TASK,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "Outline", "schema": schema, "strict": True},
        },
    )
    outline = json.loads(answer.choices[0].message.content or "")
    assert outline["sections"] == 0 and outline["headline"].startswith("Notes v0 on")


REFUSED: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("unknown model", {"model": "gpt-9"}, sdk.NotFoundError, "does not exist"),
    (
        "unknown parameter",
        {"extra_body": {"temperture": 0}},
        sdk.BadRequestError,
        "Unrecognized request argument supplied: temperture",
    ),
    (
        "tool result without a call",
        {"messages": [*TASK, {"role": "tool", "tool_call_id": "call_1", "content": "x"}]},
        sdk.BadRequestError,
        "must be a response to a preceding message with 'tool_calls'",
    ),
    (
        "call without its result",
        {
            "messages": [
                *TASK,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "search", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "and?"},
            ]
        },
        sdk.BadRequestError,
        "Missing: ['call_1']",
    ),
    (
        "strict schema left open",
        {
            "tools": [
                {**SEARCH, "function": {**SEARCH["function"], "parameters": {"type": "object"}}}
            ]
        },
        sdk.BadRequestError,
        "'additionalProperties' is required to be false",
    ),
    (
        "stream options without a stream",
        {"stream_options": {"include_usage": True}},
        sdk.BadRequestError,
        "only allowed when 'stream' is enabled",
    ),
]


@pytest.mark.parametrize(
    ("request_", "error", "message"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_malformed_requests_are_refused_and_kept(
    standin: OpenAIStandIn,
    client: sdk.OpenAI,
    request_: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    arguments: dict[str, Any] = {"model": "gpt-4o-mini", "messages": TASK, **request_}
    with pytest.raises(error, match=re.escape(message)):
        client.chat.completions.create(**arguments)
    assert standin.requests() == []
    (problem,) = standin.problems
    assert message in problem


def test_a_request_without_a_key_is_refused(standin: OpenAIStandIn) -> None:
    body = json.dumps({"model": "gpt-4o-mini", "messages": TASK}).encode()
    keyless = urllib.request.Request(f"{standin.base_url}/chat/completions", data=body)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(keyless, timeout=10)
    assert refused.value.code == 401
    refused.value.close()
    assert standin.problems == ["You didn't provide an API key."]
