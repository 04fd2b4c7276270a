"""Example crews for Countersign: a reviewed article, a research brief, a gated e-mail.

Each crew is a factory, ``function(inputs) -> crewai.Crew``, named in ``countersign.toml``
next to this file (Countersign puts this directory on ``sys.path``)::

    /crew run writer topic="durable agents"
    /crew run research topic="durable agents"
    /crew run outreach to=ada@example.com topic="durable agents"

The model comes from :func:`model`: with ``COUNTERSIGN_LLM`` set (any model string CrewAI
accepts, e.g. ``openai/gpt-4o-mini``, with the provider's key in its usual variable such as
``OPENAI_API_KEY``) the agents use that model. Without it they use Countersign's offline
scripted model, which needs no account and no network: its drafts are canned, follow the
reviewer's feedback, and call the tools in the order its plan gives. Countersign says so
in the run's thread.

``outreach`` "sends" by appending a JSON line to ``$COUNTERSIGN_OUTBOX_FILE`` (default
``sent-emails.jsonl`` in the working directory), once per idempotency key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from crewai import LLM, Agent, Crew, Process, Task
from crewai.llms.base_llm import BaseLLM
from crewai.tools import BaseTool
from pydantic import BaseModel, Field

from countersign import ScriptedLLM, ask_human, idempotency_key, requires_approval

LLM_ENV_VAR = "COUNTERSIGN_LLM"
OUTBOX_ENV_VAR = "COUNTERSIGN_OUTBOX_FILE"
DEFAULT_OUTBOX = "sent-emails.jsonl"


def model(label: str, *, draft: str = "", plan: list[Any] | None = None) -> BaseLLM:
    """The model an agent runs on: ``$COUNTERSIGN_LLM``, else the offline scripted one.

    Args:
        label: What the offline model calls its drafts ("Outline", "Brief").
        draft: The offline model's canned text; ``{placeholders}`` of
            :data:`crew_runtime.offline.plan.PLACEHOLDERS` are filled, literal braces
            doubled.
        plan: The tool calls the offline model makes, in order, e.g.
            ``[("search", {"query": "otters"})]``.

    A real model ignores ``label``, ``draft`` and ``plan``: it reads the tasks and decides.
    """
    chosen = os.environ.get(LLM_ENV_VAR, "").strip()
    if chosen:
        return LLM(model=chosen)
    return ScriptedLLM(
        model=f"scripted/example-{label.lower()}",
        label=label,
        draft_style="readable",
        draft_body=draft,
        tool_plan=plan or [],
    )


def _literal(text: str) -> str:
    """``text`` safe inside a scripted draft or plan (which fill ``{placeholders}``)."""
    return text.replace("{", "{{").replace("}", "}}")


# --- writer: an outline, then the article, both reviewed -------------------------------------

_OUTLINE = """\
Working title: {topic}, in practice

1. The problem, and why it matters now
2. The core idea, in plain words
3. A worked example, step by step
4. Pitfalls, and how to avoid them
5. Where to go next"""

_ARTICLE = """\
{topic}

Why it matters. Most teams meet {topic} the day something breaks. This article starts there.

The core idea. Keep the state somewhere durable, make each step safe to repeat, and let a \
person decide where a decision is needed.

A worked example. One request, followed from start to finish, with the places it can fail.

Pitfalls. Hidden state, steps that are not safe to repeat, and reviews nobody owns.

Where to go next. Start with one workflow, measure it, then widen."""


def writer(inputs: dict[str, str]) -> Crew:
    """Outline an article, then write it; a reviewer approves (or revises) each in turn."""
    topic = _literal(inputs["topic"])
    planner = Agent(
        role="Planner",
        goal="Plan articles that a busy engineer reads to the end",
        backstory="An editor who has cut more outlines than most people have written.",
        llm=model("Outline", draft=_OUTLINE.format(topic=topic)),
        verbose=False,
    )
    author = Agent(
        role="Writer",
        goal="Write clear, accurate articles from an approved outline",
        backstory="A technical writer who prefers short sentences and concrete examples.",
        llm=model("Article", draft=_ARTICLE.format(topic=topic)),
        verbose=False,
    )
    outline = Task(
        description="Outline a short article on {topic}: a title and five to seven sections, "
        "one line each.",
        expected_output="A title and a numbered list of sections",
        agent=planner,
        human_input=True,
    )
    article = Task(
        description="Write the article on {topic} from the approved outline, about 400 "
        "words, one short paragraph per section.",
        expected_output="The article, with the outline's title and sections",
        agent=author,
        human_input=True,
        context=[outline],
    )
    return Crew(agents=[planner, author], tasks=[outline, article], process=Process.sequential)


# --- research: search, ask the reviewer, write a brief ----------------------------------------


class SearchInput(BaseModel):
    query: str = Field(description="What to look up")


class OfflineSearchTool(BaseTool):
    """A stand-in for a web search: canned results, so the example needs no network."""

    name: str = "search"
    description: str = "Search the web for facts about a query. Returns a few short results."
    args_schema: type[BaseModel] = SearchInput

    def _run(self, query: str) -> str:
        return (
            f'3 results for "{query}" (canned offline results):\n'
            f"1. An overview of {query} and the problem it solves.\n"
            f"2. A case study: one team's first year with {query}.\n"
            f"3. A list of common mistakes with {query}, and their fixes."
        )


_BRIEF = """\
Brief: {topic}

Written for: {{observation}}

Summary. The overview, the case study and the list of common mistakes below agree on \
where {topic} helps and where it bites; the reader's focus decides which part comes first.

Recommendation. Try it on one workflow first, with the mistakes list as a checklist."""


def research(inputs: dict[str, str]) -> Crew:
    """Search, ask the reviewer who the brief is for (the run waits for the answer in
    Slack), then write a one-page brief."""
    topic = _literal(inputs["topic"])
    question = f"Who will read this brief on {topic}, and what should it focus on?"
    analyst = Agent(
        role="Research analyst",
        goal="Write short, sourced briefs that answer the reader's actual question",
        backstory="A former journalist who checks who a brief is for before writing it.",
        llm=model(
            "Brief",
            draft=_BRIEF.format(topic=topic),
            plan=[("search", {"query": topic}), ("ask_human", {"question": question})],
        ),
        tools=[OfflineSearchTool(), ask_human],
        verbose=False,
    )
    brief = Task(
        description="Research {topic} and write a one-page brief. Search first, then ask the "
        "human who the brief is for and what it should focus on, then write it for them.",
        expected_output="A brief: who it is for, a summary, the key facts with their sources, "
        "and a recommendation",
        agent=analyst,
    )
    return Crew(agents=[analyst], tasks=[brief], process=Process.sequential)


# --- outreach: draft an e-mail, send it only once a person approves --------------------------


class EmailInput(BaseModel):
    to: str = Field(description="The recipient's e-mail address")
    subject: str = Field(description="The subject line")
    body: str = Field(description="The message, in plain text")


def deliver(outbox: Path, key: str, message: dict[str, str]) -> bool:
    """The demo's "e-mail provider": append ``message`` to ``outbox`` unless ``key`` was sent.

    A real provider takes the idempotency key with the request and ignores a repeat; this
    is the same contract with a file. Returns whether the message went out now.
    """
    if outbox.exists():
        for line in outbox.read_text(encoding="utf-8").splitlines():
            if line.strip() and json.loads(line).get("key") == key:
                return False
    with outbox.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"key": key, **message}, ensure_ascii=False) + "\n")
    return True


class SendEmailTool(BaseTool):
    """Sends an e-mail (into the outbox file). Gated below: a person approves every call."""

    name: str = "send_email"
    description: str = "Send an e-mail to one recipient."
    args_schema: type[BaseModel] = EmailInput

    def _run(self, to: str, subject: str, body: str) -> str:
        # The same key on a retry (a worker died after sending): the message goes out once.
        key = idempotency_key() or f"outside-countersign:{to}:{subject}"
        outbox = Path(os.environ.get(OUTBOX_ENV_VAR) or DEFAULT_OUTBOX)
        sent = deliver(outbox, key, {"to": to, "subject": subject, "body": body})
        already = "" if sent else " (it had already been sent; not sent again)"
        return f'Sent to {to}: "{subject}"{already}'


def outreach(inputs: dict[str, str]) -> Crew:
    """Draft an e-mail to ``to`` about ``topic`` and send it; the call to ``send_email``
    waits for a reviewer, who approves it, edits its fields or denies it."""
    to, topic = _literal(inputs["to"]), _literal(inputs["topic"])
    email = {
        "to": to,
        "subject": f"A short note on {topic}",
        "body": f"Hi,\n\nI put together a few notes on {topic} and thought of you. "
        "Would 20 minutes next week suit you to go through them?\n\nBest regards",
    }
    manager = Agent(
        role="Account manager",
        goal="Write short, friendly e-mails that get a reply",
        backstory="Writes the way people talk, and never sends anything twice.",
        llm=model(
            "Outreach report",
            draft=f"E-mail to {to} about {topic}: what happened to it is below.",
            plan=[("send_email", email)],
        ),
        tools=[requires_approval(SendEmailTool())],
        verbose=False,
    )
    task = Task(
        description="Write a short e-mail to {to} about {topic} proposing a 20-minute call, "
        "and send it with the send_email tool. Then report what happened to it.",
        expected_output="Whether the e-mail was sent, to whom and with which subject",
        agent=manager,
    )
    return Crew(agents=[manager], tasks=[task], process=Process.sequential)
