"""Crews the tests run: real CrewAI crews on the scripted LLM.

Side effects go to a file named by ``COUNTERSIGN_TEST_EFFECTS`` so tests in other
processes can count them. ``publish`` is the side-effecting tool: it calls an
"external service" (the effects file) with Countersign's idempotency key, the way
a payment or e-mail API would be called, and records every execution separately.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from crewai import Agent, Crew, Process, Task
from crewai.flow import Flow, human_feedback, listen, start
from crewai.tools import BaseTool
from crewai.utilities.planning_handler import PlannerTaskPydanticOutput, PlanPerTask
from pydantic import BaseModel

from crew_runtime import ask_human, idempotency_key, requires_approval
from crew_runtime.context import current_run
from crew_runtime.offline.script import ScriptedReply
from crew_runtime.offline.scripted_llm import ScriptedLLM


def _effects() -> Path | None:
    path = os.environ.get("COUNTERSIGN_TEST_EFFECTS")
    return Path(path) if path else None


def effects(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _append(entry: dict[str, Any]) -> None:
    path = _effects()
    if path is None:
        return
    with path.open("a") as fh:
        fh.write(json.dumps(entry) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _pause_point(name: str) -> None:
    """Hold here when ``COUNTERSIGN_TEST_HOLD=name``, so a test can kill the process."""
    if os.environ.get("COUNTERSIGN_TEST_HOLD") == name:
        _append({"kind": "holding", "at": name, "pid": os.getpid()})
        time.sleep(600)


class PublishInput(BaseModel):
    text: str


class PublishTool(BaseTool):
    name: str = "publish"
    description: str = "Publish a text to the company blog. Has a side effect."
    args_schema: type[BaseModel] = PublishInput

    def _run(self, text: str) -> str:
        key = idempotency_key()
        _append({"kind": "execution", "key": key, "pid": os.getpid()})
        path = _effects()
        done = {e["key"] for e in effects(path) if e["kind"] == "published"} if path else set()
        if key not in done:
            _append({"kind": "published", "key": key, "text": text, "pid": os.getpid()})
        _pause_point("after_publish")
        return f"published {len(text)} characters"


class SearchInput(BaseModel):
    query: str


class SearchTool(BaseTool):
    name: str = "search"
    description: str = "Search the web for facts."
    args_schema: type[BaseModel] = SearchInput

    def _run(self, query: str) -> str:
        _append({"kind": "search", "query": query, "pid": os.getpid()})
        return f"3 facts about {query}"


class SlowScriptedLLM(ScriptedLLM):
    """The scripted model, holding on its Nth call when a test wants to kill it mid-call."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        if os.environ.get("COUNTERSIGN_TEST_HOLD") == "llm" and self.calls >= 1:
            _pause_point("llm")
        return super().call(messages, *args, **kwargs)


def _llm(label: str, plan: list[Any] | None = None) -> ScriptedLLM:
    version = os.environ.get("COUNTERSIGN_TEST_CREW_VERSION", "1")
    cls = SlowScriptedLLM if os.environ.get("COUNTERSIGN_TEST_HOLD") == "llm" else ScriptedLLM
    return cls(model=f"scripted/{label.lower()}-{version}", label=label, tool_plan=plan or [])


def writer(inputs: dict[str, str]) -> Crew:
    """Two reviewed tasks: an outline, then an article written from it."""
    _pause_point("factory")
    version = os.environ.get("COUNTERSIGN_TEST_CREW_VERSION", "1")
    writer_agent = Agent(
        role="Writer",
        goal="Write clear articles",
        backstory="A careful writer." + (" Now terser." if version == "2" else ""),
        llm=_llm("Outline"),
        verbose=False,
    )
    editor = Agent(
        role="Editor",
        goal="Turn outlines into articles",
        backstory="An editor.",
        llm=_llm("Article"),
        verbose=False,
    )
    outline = Task(
        description="Outline {topic}",
        expected_output="An outline",
        agent=writer_agent,
        human_input=True,
    )
    article = Task(
        description="Write the article about {topic}",
        expected_output="An article",
        agent=editor,
        human_input=True,
        context=[outline],
    )
    return Crew(agents=[writer_agent, editor], tasks=[outline, article], process=Process.sequential)


def research(inputs: dict[str, str]) -> Crew:
    """One task whose agent searches, asks a human mid-task, then publishes."""
    researcher = Agent(
        role="Researcher",
        goal="Research and publish",
        backstory="Thorough.",
        llm=_llm(
            "Report",
            [
                ("search", {"query": "{subject}"}),
                ("ask_human", {"question": "Formal or casual tone for {subject}?"}),
                ("publish", {"text": "Report on {subject}"}),
            ],
        ),
        tools=[SearchTool(), ask_human, PublishTool()],
        verbose=False,
    )
    task = Task(description="Research {topic}", expected_output="A report", agent=researcher)
    return Crew(agents=[researcher], tasks=[task], process=Process.sequential)


def broken(inputs: dict[str, str]) -> Crew:
    raise RuntimeError("the crew could not be built")


def plain(inputs: dict[str, str]) -> Crew:
    """No human: one task that searches once (the search records which process ran it)."""
    agent = Agent(
        role="Analyst",
        goal="Find facts",
        backstory="Quick.",
        llm=_llm("Facts", [("search", {"query": "{subject}"})]),
        tools=[KeyedSearchTool()],
        verbose=False,
    )
    task = Task(description="Find facts on {topic}", expected_output="Facts", agent=agent)
    return Crew(agents=[agent], tasks=[task], process=Process.sequential)


class KeyedSearchTool(SearchTool):
    """A search that logs its idempotency key, to prove each call ran in one worker only."""

    def _run(self, query: str) -> str:
        _append({"kind": "keyed_search", "key": idempotency_key(), "pid": os.getpid()})
        time.sleep(0.05)
        return super()._run(query)


def _live(what: str, key: str | None = None) -> None:
    """Note a live call, tagged with the execution making it: process and claim.

    A run's tags must never go back to an earlier execution: one that was replaced may
    finish the call it was in, and must make no other.
    """
    ctx = current_run()
    if ctx is None:
        return
    _append(
        {
            "kind": "live",
            "what": what,
            "run": ctx.run.id,
            "key": key,
            "execution": f"{os.getpid()}:{ctx.lease_token}",
            "pid": os.getpid(),
        }
    )


class TaggedLLM(ScriptedLLM):
    """The scripted model, noting which execution made each live call."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        _live("llm")
        return super().call(messages, *args, **kwargs)


class SendInput(BaseModel):
    text: str


class SendNewsletterTool(BaseTool):
    """A slow side effect, applied once per idempotency key like an e-mail API's.

    It notes its start (tests stop the process inside it), then takes its time:
    ``COUNTERSIGN_TEST_TOOL_SECONDS``, or until the file ``COUNTERSIGN_TEST_RELEASE``
    exists (at most two minutes), and then sends, unless a call with its key already did.
    """

    name: str = "send_newsletter"
    description: str = "Send the newsletter to every subscriber. Has a side effect."
    args_schema: type[BaseModel] = SendInput

    def _run(self, text: str) -> str:
        key = idempotency_key()
        _live("tool", key)
        release = os.environ.get("COUNTERSIGN_TEST_RELEASE")
        if release:
            deadline = time.monotonic() + 120
            while not Path(release).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        else:
            time.sleep(float(os.environ.get("COUNTERSIGN_TEST_TOOL_SECONDS", "0")))
        path = _effects()
        if path is not None and key is not None:
            sent = path.with_suffix(".sent")
            sent.mkdir(exist_ok=True)
            try:  # the "service" keeps one file per key: O_EXCL lets one call in
                os.close(os.open(sent / hashlib.sha256(key.encode()).hexdigest(), _CREATE_NEW))
            except FileExistsError:
                return f"already sent ({len(text)} characters)"
            _append({"kind": "sent", "key": key, "pid": os.getpid()})
        return f"sent {len(text)} characters"


_CREATE_NEW = os.O_CREAT | os.O_EXCL | os.O_WRONLY


def newsletter(inputs: dict[str, str]) -> Crew:
    """One task: the model asks for the (slow) newsletter to be sent, then reports."""
    editor = Agent(
        role="Editor",
        goal="Send the newsletter",
        backstory="Punctual.",
        llm=TaggedLLM(
            model="scripted/newsletter",
            label="Report",
            tool_plan=[("send_newsletter", {"text": "News on {subject}"})],
        ),
        tools=[SendNewsletterTool()],
        verbose=False,
    )
    task = Task(description="Send the news on {topic}", expected_output="A report", agent=editor)
    return Crew(agents=[editor], tasks=[task], process=Process.sequential)


class LongformLLM(ScriptedLLM):
    """Answers with a draft longer than one Slack message (``length`` characters of body)."""

    length: int = 30_000

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        reply = super().call(messages, *args, **kwargs)
        body = "".join(f"Paragraph {n}: otters are <b>&amp; fun</b>.\n\n" for n in range(800))
        return f"{reply}\n\n{body[: self.length]}"


def longform(inputs: dict[str, str]) -> Crew:
    """One reviewed task whose draft is ``length`` characters long (30,000 by default).

    Past 12,000 characters the draft goes up as a file; 8,000 makes a two-part draft.
    """
    agent = Agent(
        role="Novelist",
        goal="Write at length",
        backstory="Verbose.",
        llm=LongformLLM(
            model="scripted/longform", label="Chapter", length=int(inputs.get("length", 30_000))
        ),
        verbose=False,
    )
    task = Task(
        description="Write a chapter on {topic}",
        expected_output="A chapter",
        agent=agent,
        human_input=True,
    )
    return Crew(agents=[agent], tasks=[task], process=Process.sequential)


class UnstorableLLM(ScriptedLLM):
    """Ends every draft with a character a database may refuse (``poison``)."""

    poison: str = "\x00"

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return f"{super().call(messages, *args, **kwargs)} {self.poison}"


def unstorable(inputs: dict[str, str]) -> Crew:
    """One task whose draft holds a NUL (``poison=nul``) or a lone surrogate (``surrogate``);
    reviewed with ``reviewed=yes``, else its draft is the run's output. ``role`` names its
    agent (a very long one makes a journal stream longer than its column)."""
    agent = Agent(
        role=inputs.get("role", "Typist"),
        goal="Type",
        backstory="Careless.",
        llm=UnstorableLLM(
            model="scripted/unstorable",
            label="Note",
            poison={"nul": "\x00", "surrogate": "\ud800", "none": ""}[inputs["poison"]],
        ),
        verbose=False,
    )
    task = Task(
        description="Note on {poison}",
        expected_output="A note",
        agent=agent,
        human_input=inputs.get("reviewed") == "yes",
    )
    return Crew(agents=[agent], tasks=[task], process=Process.sequential)


class PayInput(BaseModel):
    amount: int
    to: str


class PayTool(BaseTool):
    name: str = "pay"
    description: str = "Pay an amount to a supplier. Moves money."
    args_schema: type[BaseModel] = PayInput

    def _run(self, amount: int, to: str) -> str:
        _pause_point(f"pay {amount} {to}")
        _append({"kind": "paid", "amount": amount, "to": to, "key": idempotency_key()})
        return f"paid {amount} to {to}"


def payments(inputs: dict[str, str]) -> Crew:
    """Pays a supplier; payments of 1000 or more wait for a reviewer's approval."""
    amount = int(inputs.get("amount", "1500"))
    _pause_point("factory")
    clerk = Agent(
        role="Clerk",
        goal="Pay suppliers",
        backstory="Careful with money.",
        llm=_llm("Receipt", [("pay", {"amount": amount, "to": "ACME"})]),
        tools=[requires_approval(PayTool(), when=lambda args: args["amount"] >= 1000)],
        verbose=False,
    )
    task = Task(description="Pay ACME", expected_output="A receipt", agent=clerk)
    return Crew(agents=[clerk], tasks=[task], process=Process.sequential)


def payroll(inputs: dict[str, str]) -> Crew:
    """Three gated payments, one model turn each: ACME 1500, ACME 2000, then GLOBEX 1200."""
    plan = [
        ("pay", {"amount": 1500, "to": "ACME"}),
        ("pay", {"amount": 2000, "to": "ACME"}),
        ("pay", {"amount": 1200, "to": "GLOBEX"}),
    ]
    clerk = Agent(
        role="Clerk",
        goal="Pay suppliers",
        backstory="Careful with money.",
        llm=_llm("Receipt", plan),
        tools=[requires_approval(PayTool())],
        verbose=False,
    )
    task = Task(description="Pay the month's invoices", expected_output="A receipt", agent=clerk)
    return Crew(agents=[clerk], tasks=[task], process=Process.sequential)


def trilogy(inputs: dict[str, str]) -> Crew:
    """Three reviewed tasks, each built on the one before."""
    agents = [
        Agent(role=role, goal="Write", backstory="Writes.", llm=_llm(label), verbose=False)
        for role, label in (("Planner", "Plan"), ("Drafter", "Draft"), ("Editor", "Final"))
    ]
    plan = Task(description="Plan {topic}", expected_output="A plan", agent=agents[0])
    draft = Task(description="Draft {topic}", expected_output="A draft", agent=agents[1])
    final = Task(description="Finish {topic}", expected_output="A text", agent=agents[2])
    plan.human_input = draft.human_input = final.human_input = True
    draft.context = [plan]
    final.context = [draft]
    return Crew(agents=agents, tasks=[plan, draft, final], process=Process.sequential)


class ArticleState(BaseModel):
    topic: str = ""
    draft: str = ""
    feedback: list[str] = []


class ArticleFlow(Flow[ArticleState]):
    """Two steps: draft (reviewed with CrewAI's own @human_feedback), then publish or shelve.

    ``llm`` is left unset on purpose: CrewAI would call a default OpenAI model to read the
    reviewer's words; Countersign routes by the clicked button, so no model is needed.
    """

    @start()
    @human_feedback(message="Publish this draft?", emit=["approved", "rejected"])
    def draft_article(self) -> str:
        self.state.draft = f"Draft on {self.state.topic} (round {len(self.state.feedback)})"
        return self.state.draft

    @listen("approved")
    def publish(self) -> str:
        _pause_point("publish")
        _append({"kind": "flow_published", "draft": self.state.draft, "pid": os.getpid()})
        return f"PUBLISHED: {self.state.draft}"

    @listen("rejected")
    def shelve(self) -> str:
        feedback = self.last_human_feedback.feedback if self.last_human_feedback else ""
        return f"SHELVED: {self.state.draft} ({feedback})"


def article_flow(inputs: dict[str, str]) -> ArticleFlow:
    return ArticleFlow()


def parallel_payments(inputs: dict[str, str]) -> Crew:
    """Native function calling: one model turn pays ACME 1500 and GLOBEX 2000, both gated.

    CrewAI runs the two calls in parallel threads; with ``sequential="yes"`` the pay tool
    gets a ``max_usage_count``, which makes CrewAI run the turn's calls one by one.
    """
    pay = requires_approval(PayTool(), when=lambda args: args["amount"] >= 1000)
    if inputs.get("sequential") == "yes":
        pay.max_usage_count = 10
    clerk = Agent(
        role="Clerk",
        goal="Pay suppliers",
        backstory="Careful with money.",
        llm=ScriptedLLM(
            model="scripted/parallel-receipt",
            label="Receipt",
            native=True,
            tool_plan=[
                [("pay", {"amount": 1500, "to": "ACME"}), ("pay", {"amount": 2000, "to": "GLOBEX"})]
            ],
        ),
        tools=[pay],
        verbose=False,
    )
    task = Task(description="Pay ACME and GLOBEX", expected_output="A receipt", agent=clerk)
    return Crew(agents=[clerk], tasks=[task], process=Process.sequential)


class FailingLLM(ScriptedLLM):
    """A model whose provider fails: a real error, to tell apart from a pause."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the provider is down")


def verbose(inputs: dict[str, str]) -> Crew:
    """A verbose crew (CrewAI prints panels as it goes) that asks a human, or whose model
    fails with ``fail=yes``."""
    llm = (
        FailingLLM(model="scripted/failing")
        if inputs.get("fail") == "yes"
        else _llm("Report", [("ask_human", {"question": "Formal or casual for {subject}?"})])
    )
    agent = Agent(
        role="Reporter",
        goal="Report",
        backstory="Chatty.",
        llm=llm,
        tools=[ask_human],
        verbose=True,
        max_retry_limit=0,
    )
    task = Task(description="Report on {topic}", expected_output="A report", agent=agent)
    return Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=True)


class ReadWebsiteInput(BaseModel):
    website_url: str


class ReadWebsiteTool(BaseTool):
    """Reads a page (a stand-in for crewai-tools' website reader); records each read."""

    name: str = "read_website_content"
    description: str = "Read the text of a website."
    args_schema: type[BaseModel] = ReadWebsiteInput

    def _run(self, website_url: str) -> str:
        _append({"kind": "read", "url": website_url, "key": idempotency_key(), "pid": os.getpid()})
        return f"the page {website_url} says otters hold hands"


# What the analyst does in delegated work: a gated read, or a question to a person.
_ANALYST_PLANS: dict[str, list[Any]] = {
    "gate": [("read_website_content", {"website_url": "https://example.com/{subject}"})],
    "question": [("ask_human", {"question": "Which angle on {subject}?"})],
    "none": [],
}

# How a lead hands work to the analyst: CrewAI's two delegation tools (sanitised names).
_HANDOFFS: dict[str, tuple[str, dict[str, str]]] = {
    "delegate": (
        "delegate_work_to_coworker",
        {
            "task": "Research {subject}",
            "context": "Brief, draft {revision}.",
            "coworker": "Analyst",
        },
    ),
    "ask": (
        "ask_question_to_coworker",
        {"question": "What matters about {subject}?", "context": "A brief.", "coworker": "Analyst"},
    ),
}


def delegation(inputs: dict[str, str]) -> Crew:
    """A lead hands work to an analyst, whose delegated work pauses.

    ``process``: ``manager_llm`` or ``manager_agent`` (a hierarchical crew whose manager
    delegates the task) or ``sequential`` (the task's agent has ``allow_delegation=True``);
    ``handoff``: ``delegate`` or ``ask`` (CrewAI's "Delegate work to coworker" or "Ask
    question to coworker"); ``pause``: ``gate`` (a gated ``read_website_content``),
    ``question`` (``ask_human``) or ``none``; ``native=yes`` for native tool calling;
    ``review=yes`` puts ``human_input`` on the task.
    """
    native = inputs.get("native") == "yes"
    process = inputs.get("process", "manager_llm")
    tool, args = _HANDOFFS[inputs.get("handoff", "delegate")]
    lead_llm = ScriptedLLM(
        model="scripted/lead", label="Brief", native=native, tool_plan=[(tool, args)]
    )
    analyst = Agent(
        role="Analyst",
        goal="Find facts",
        backstory="Reads sources.",
        llm=ScriptedLLM(
            model="scripted/analyst",
            label="Findings",
            native=native,
            tool_plan=_ANALYST_PLANS[inputs.get("pause", "gate")],
        ),
        tools=[requires_approval(ReadWebsiteTool()), ask_human],
        verbose=False,
    )
    task = Task(
        description="Write a brief on {topic}",
        expected_output="A brief",
        human_input=inputs.get("review") == "yes",
    )
    if process == "sequential":
        lead = Agent(
            role="Lead",
            goal="Write briefs",
            backstory="Delegates research.",
            llm=lead_llm,
            allow_delegation=True,
            verbose=False,
        )
        task.agent = lead
        return Crew(agents=[lead, analyst], tasks=[task], process=Process.sequential)
    if process == "manager_agent":
        manager = Agent(
            role="Lead",
            goal="Write briefs",
            backstory="Delegates research.",
            llm=lead_llm,
            allow_delegation=True,
            verbose=False,
        )
        return Crew(
            agents=[analyst], tasks=[task], process=Process.hierarchical, manager_agent=manager
        )
    return Crew(agents=[analyst], tasks=[task], process=Process.hierarchical, manager_llm=lead_llm)


class TallyTool(SearchTool):
    """A search that records itself, then (``COUNTERSIGN_TEST_HOLD=until_paused``) does not
    return before ``kickoff()`` has ended for a pause elsewhere: a parallel task's call
    still in flight when another task pauses."""

    name: str = "tally"
    description: str = "Count the sources on a subject."

    def _run(self, query: str) -> str:
        _append({"kind": "tally", "query": query, "key": idempotency_key(), "pid": os.getpid()})
        ctx = current_run()
        if ctx is not None and os.environ.get("COUNTERSIGN_TEST_HOLD") == "until_paused":
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not _paused(ctx):
                time.sleep(0.05)
        return f"12 sources on {query}"


class AfterEffectLLM(ScriptedLLM):
    """The scripted model; with ``COUNTERSIGN_TEST_HOLD=until_paused`` it answers only once
    an effect of kind ``after`` was recorded (so a parallel task's call is under way)."""

    after: str = ""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        if self.after and os.environ.get("COUNTERSIGN_TEST_HOLD") == "until_paused":
            path = _effects()
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and path is not None:
                if any(e["kind"] == self.after for e in effects(path)):
                    break
                time.sleep(0.05)
        return super().call(messages, *args, **kwargs)


def _paused(ctx: Any) -> bool:
    """The execution is over but waits for this call, or (a runtime that did not wait for
    calls in flight, and had no ``closed``) the run was suspended already."""
    return bool(getattr(ctx, "closed", False)) or ctx.store.get_run(ctx.run.id).status != (
        "running"
    )


def parallel(inputs: dict[str, str]) -> Crew:
    """Two ``async_execution`` tasks side by side, then a task that joins them.

    The scout reads a page through a gate (the run pauses there) while the counter tallies
    sources (a side effect); the editor writes from both. ``native=yes`` for native tool
    calling. A worker with ``COUNTERSIGN_TEST_HOLD=until_paused`` makes the scout wait for
    the tally to start, and the tally last until the run stops for the scout's pause.
    """
    native = inputs.get("native") == "yes"

    def agent(
        role: str, label: str, plan: list[Any], tools: list[BaseTool], after: str = ""
    ) -> Agent:
        llm = AfterEffectLLM(
            model=f"scripted/{label.lower()}", label=label, native=native, tool_plan=plan
        )
        llm.after = after
        return Agent(role=role, goal=label, backstory="Works.", llm=llm, tools=tools)

    scout = agent(
        "Scout",
        "Scouting",
        [("read_website_content", {"website_url": "https://example.com/{subject}"})],
        [requires_approval(ReadWebsiteTool())],
        after="tally",  # with the hold: the scout pauses while the tally is in flight
    )
    counter = agent("Counter", "Tally", [("tally", {"query": "{subject}"})], [TallyTool()])
    editor = agent("Editor", "Digest", [], [])
    scouting = Task(
        description="Scout {topic}", expected_output="Pages", agent=scout, async_execution=True
    )
    tally = Task(
        description="Tally {topic}", expected_output="A count", agent=counter, async_execution=True
    )
    digest = Task(
        description="Digest {topic}",
        expected_output="A digest",
        agent=editor,
        context=[scouting, tally],
    )
    return Crew(
        agents=[scout, counter, editor],
        tasks=[scouting, tally, digest],
        process=Process.sequential,
    )


def swallowing(inputs: dict[str, str]) -> Crew:
    """A task callback asks a checker agent, and swallows whatever the checker raises.

    The checker's ``ask_human`` pauses the run inside the callback, where no tool is
    around to raise the pause again: only the runtime's last look before settling sees it.
    """
    checker = Agent(
        role="Checker",
        goal="Double-check",
        backstory="Asks when unsure.",
        llm=_llm("Check", [("ask_human", {"question": "Is this right?"})]),
        tools=[ask_human],
        verbose=False,
    )
    writer_agent = Agent(
        role="Writer", goal="Write", backstory="Writes.", llm=_llm("Note"), verbose=False
    )

    def double_check(output: Any) -> None:
        try:
            checked = checker.kickoff(f"Double-check this note: {output.raw}")
        except Exception:  # a check must never fail the task, its author thought
            return
        _append({"kind": "checked", "result": str(checked.raw), "pid": os.getpid()})

    task = Task(
        description="Note on {topic}",
        expected_output="A note",
        agent=writer_agent,
        callback=double_check,
    )
    return Crew(agents=[writer_agent, checker], tasks=[task], process=Process.sequential)


class PlannerLLM(ScriptedLLM):
    """Plans like a model asked by CrewAI's planner: a plan for each task of the summary."""

    def reply(self, messages: Any, response_model: Any = None, tools: Any = None) -> ScriptedReply:
        summary = json.dumps(messages)
        plans = [
            PlanPerTask(task_number=n, task=f"task {n}", plan=f" (plan {n}: step by step)")
            for n in range(1, summary.count("Task Number ") + 1)
        ]
        plan = PlannerTaskPydanticOutput(list_of_plans_per_task=plans)
        return ScriptedReply("final", plan.model_dump_json())


class DatedLLM(ScriptedLLM):
    """The scripted model, noting the date each live prompt showed (``Current Date:``)."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        dates = re.findall(r"Current Date: ([^\n\"]+)", json.dumps(messages))
        _append({"kind": "saw_date", "dates": sorted(set(dates)), "pid": os.getpid()})
        return super().call(messages, *args, **kwargs)


class NoteTool(BaseTool):
    """Files a note (recorded); holds first with ``COUNTERSIGN_TEST_HOLD=note``."""

    name: str = "file_note"
    description: str = "File a note for the team."
    args_schema: type[BaseModel] = PublishInput  # a text, as publish takes

    def _run(self, text: str) -> str:
        _pause_point("note")
        _append({"kind": "note", "text": text, "key": idempotency_key(), "pid": os.getpid()})
        return f"filed: {text}"


def _callback(which: str) -> Any:
    def report(what: Any) -> None:
        name = type(what).__name__
        if name == "TaskOutput":
            name = str(getattr(what, "agent", ""))
        _append({"kind": "callback", "which": which, "what": name, "pid": os.getpid()})

    return report


def options(inputs: dict[str, str]) -> Crew:
    """A crew with the options Countersign keeps on: planning (a scripted planner),
    ``inject_date`` and step, task and crew task callbacks that record each call.

    A researcher searches (a ReAct step), then a writer asks a person
    (``pause=question``) or files a note (``pause=note``; a worker with
    ``COUNTERSIGN_TEST_HOLD=note`` holds inside it, to be killed there). ``planning=off``
    leaves the planner out.
    """
    researcher = Agent(
        role="Researcher",
        goal="Gather facts",
        backstory="Thorough.",
        llm=DatedLLM(
            model="scripted/facts", label="Facts", tool_plan=[("search", {"query": "{subject}"})]
        ),
        tools=[SearchTool()],
        inject_date=True,
        verbose=False,
    )
    step = (
        ("ask_human", {"question": "Which angle on {subject}?"})
        if inputs.get("pause", "question") == "question"
        else ("file_note", {"text": "about {subject}"})
    )
    writer_agent = Agent(
        role="Writer",
        goal="Write",
        backstory="Writes.",
        llm=DatedLLM(model="scripted/story", label="Story", tool_plan=[step]),
        tools=[ask_human, NoteTool()],
        inject_date=True,
        date_format="%A %d %B %Y",
        verbose=False,
    )
    gather = Task(
        description="Gather {topic}",
        expected_output="Facts",
        agent=researcher,
        callback=_callback("task"),
    )
    write = Task(description="Write {topic}", expected_output="A story", agent=writer_agent)
    return Crew(
        agents=[researcher, writer_agent],
        tasks=[gather, write],
        process=Process.sequential,
        planning=inputs.get("planning", "on") == "on",
        planning_llm=PlannerLLM(model="scripted/planner", label="Plan"),
        step_callback=_callback("step"),
        task_callback=_callback("crew_task"),
    )


def unreplayable(inputs: dict[str, str]) -> Crew:
    """One task with an option Countersign refuses (``option``): ``planning`` with no
    planning_llm (memory and knowledge: ``tests/support/recall_crews.py``)."""
    agent = Agent(role="Clerk", goal="File", backstory="Files.", llm=_llm("Filed"), verbose=False)
    task = Task(description="File {topic}", expected_output="A file", agent=agent)
    planning = inputs["option"] == "planning"
    return Crew(agents=[agent], tasks=[task], process=Process.sequential, planning=planning)


def long_loop(inputs: dict[str, str]) -> Crew:
    """A long agentic task (``turns`` searches), then a question, then publishing; after it
    a reviewed task. ``COUNTERSIGN_TEST_CREW_VERSION=2`` changes the first agent's words."""
    searches: list[Any] = [
        ("search", {"query": f"{{subject}} {n}"}) for n in range(int(inputs["turns"]))
    ]
    researcher = Agent(
        role="Researcher",
        goal="Research and publish",
        backstory="Thorough." + (" Now terser." if _version() == "2" else ""),
        llm=_llm(
            "Report",
            [
                *searches,
                ("ask_human", {"question": "Formal or casual tone for {subject}?"}),
                ("publish", {"text": "Report on {subject}"}),
            ],
        ),
        tools=[SearchTool(), ask_human, PublishTool()],
        max_iter=int(inputs["turns"]) + 5,
        verbose=False,
    )
    editor = Agent(role="Editor", goal="Edit", backstory="Edits.", llm=_llm("Final"), verbose=False)
    research = Task(description="Research {topic}", expected_output="A report", agent=researcher)
    final = Task(
        description="Edit the report on {topic}",
        expected_output="A text",
        agent=editor,
        human_input=True,
        context=[research],
    )
    return Crew(agents=[researcher, editor], tasks=[research, final], process=Process.sequential)


def _version() -> str:
    return os.environ.get("COUNTERSIGN_TEST_CREW_VERSION", "1")


def repeating(inputs: dict[str, str]) -> Crew:
    """One agent searching the same query again and again, a question between each two
    searches: CrewAI stops the fifth identical call with the same result, so a resume must
    count the ones made before it (across four pauses here)."""
    same = ("search", {"query": "{subject}"})
    ask = ("ask_human", {"question": "More?"})
    researcher = Agent(
        role="Researcher",
        goal="Research",
        backstory="Insistent.",
        llm=_llm("Report", [same, ask, same, ask, same, ask, same, ask, same]),
        tools=[SearchTool(), ask_human],
        verbose=False,
    )
    task = Task(description="Research {topic}", expected_output="A report", agent=researcher)
    return Crew(agents=[researcher], tasks=[task], process=Process.sequential)
