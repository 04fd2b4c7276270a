"""``input()`` in a crew written for the console becomes a question in the run's thread.

A worker has no console: CrewAI's own "Human Feedback in Flows" example asks for its topic
with ``input()`` in ``@start``, lead-score-flow's router asks the console what to do next,
and tools ask the person at the keyboard. Inside a run, :func:`install` makes ``input(prompt)``
ask the run's reviewers ``prompt`` (a question review, as ``ask_human`` opens) and suspend the
run; the resumed execution runs the step or the tool again, and the same ``input()`` call
returns the answer, so the crew works unchanged.

The n-th ``input()`` of a flow step or a tool call is question n of the stream
``{place}/console:input`` (``crew_runtime.streams.console_stream``), its place the flow step
(``flow:<method>``) or the tool call (``task0:Writer>2``): the same call on every execution.
A rejection rejects the run; an expired question reads as an empty line (pressing Enter).

Outside a worker ``input()`` is Python's own. In a worker but outside a run's step or tool (the
crew's factory, which is called before the run starts and on every execution), no question can
be asked: ``input()`` raises :class:`~crew_runtime.errors.ConsoleInputRefused` naming the fix,
and the run fails with it as its reason, never with the ``EOFError`` of a worker's stdin.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable
from typing import Any

from crewai.flow.flow_context import current_flow_method_name

from crew_runtime import streams
from crew_runtime.context import RunContext, current_run
from crew_runtime.errors import ConsoleInputRefused
from crew_runtime.people import reviewer
from crew_runtime.signals import PauseRun, RunRejected
from storage import DecisionKind, NewReview, QuestionDetails, ReviewKind, ReviewStatus

_lock = threading.Lock()
_installed = False
_in_worker = False

NO_PROMPT = "The crew is waiting for input (it called input() with no prompt)."


def install() -> None:
    """Turn ``input()`` into a question wherever a run is current (idempotent)."""
    global _installed, _in_worker
    with _lock:
        _in_worker = True
        if _installed:
            return
        builtins.input = _console(builtins.input)
        _installed = True


def _console(original: Callable[..., str]) -> Callable[..., str]:
    def input(prompt: Any = "", /) -> str:
        ctx = current_run()
        if ctx is None:
            if _in_worker:
                raise ConsoleInputRefused(
                    f"the crew called input({str(prompt)!r}) outside a flow step or a tool "
                    "of its run (in its factory, as a module is imported, or in a process of "
                    "its own), where Countersign cannot ask its reviewers and a worker has no "
                    "console: take the value as an input of the run, or ask from a step or "
                    "a tool (input() there, or countersign.ask_human)"
                )
            return original(prompt)
        return ask(ctx, str(prompt))

    input.countersign = True  # type: ignore[attr-defined]
    return input


def _place(ctx: RunContext) -> tuple[str, str]:
    """Where ``input()`` is called (see the module), and who asks (an agent, a flow step)."""
    slot = ctx.tool_slot()
    if slot is not None:
        return streams.nested_place(slot.key.stream, slot.key.seq), slot.agent
    method = current_flow_method_name.get()
    if method:
        return streams.flow_step(method), method
    return streams.OUTSIDE, ""


def ask(ctx: RunContext, prompt: str) -> str:
    """The answer to the question ``prompt`` asked at the current place; or the run pauses
    for it (raises :class:`PauseRun`) or is rejected."""
    if ctx.signalled:  # pausing already (a retried tool, a second input): ask nothing more
        raise ctx.signal(PauseRun("the run is pausing for a person"))
    place, who = _place(ctx)
    stream = streams.console_stream(place)
    seq = ctx.next_seq(stream, "input")
    question = prompt.strip() or NO_PROMPT
    review = ctx.find_review(ReviewKind.QUESTION, stream, seq)
    if review is None or review.status == ReviewStatus.PENDING:
        if review is None:
            ctx.ask(
                NewReview(
                    kind=ReviewKind.QUESTION,
                    stream=stream,
                    seq=seq,
                    prompt=question,
                    details=QuestionDetails(agent=who),
                )
            )
        raise ctx.signal(PauseRun(f"input() at {place} waits for an answer"))
    decision = review.decision
    if decision is None or decision.kind == DecisionKind.EXPIRE:
        return ""
    if decision.kind == DecisionKind.REJECT:
        reason = decision.text or f"rejected by {reviewer(decision)}"
        ctx.reject(reason)
        raise ctx.signal(RunRejected(reason))
    return decision.text or ""
