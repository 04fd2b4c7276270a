"""The crew ``bench/chaos.py`` runs while faults hit: a side effect, a gated side effect, a review.

Each run's agent (on the offline scripted model) records a fact, then sends a message (a
gated tool: a reviewer approves the call first), then its report is reviewed
(``human_input``). Both tools change an "external system", a directory where each effect is a
file named by Countersign's idempotency key (created with ``O_EXCL``: the system applies a key
once, as a payment API would). Everything that starts is logged with the execution it belongs
to (the run's claim token), so the benchmark can tell whether two executions of one run ever
took turns.

Environment: ``CHAOS_DIR`` (the effects directory and ``log.jsonl``).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from crewai import Agent, Crew, Process, Task
from crewai.tools import BaseTool
from pydantic import BaseModel

from crew_runtime import idempotency_key, requires_approval
from crew_runtime.context import current_run
from crew_runtime.offline.scripted_llm import ScriptedLLM

# A side effect takes this long: long enough for a fault to land inside one.
EFFECT_SECONDS = 0.3


def _dir() -> Path:
    return Path(os.environ["CHAOS_DIR"])


def log(what: str, **fields: Any) -> None:
    """One line of ``log.jsonl``, tagged with the run and the execution (claim) doing it."""
    ctx = current_run()
    entry = {
        "what": what,
        "run": ctx.run.id if ctx else None,
        "execution": ctx.lease_token if ctx else None,
        "pid": os.getpid(),
        **fields,
    }
    # One write of a short line with O_APPEND: lines of several processes never interleave.
    with (_dir() / "log.jsonl").open("a") as fh:
        fh.write(json.dumps(entry) + "\n")


def apply_effect(kind: str, detail: str) -> str:
    """The external system: an effect applies once per idempotency key."""
    key = idempotency_key() or "none"
    log("tool", tool=kind, key=key)
    time.sleep(EFFECT_SECONDS)
    effects = _dir() / "effects"
    effects.mkdir(exist_ok=True)
    try:
        fd = os.open(effects / key.replace("/", "_"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        log("effect", tool=kind, key=key, applied=False)
        return f"{kind}: already done ({detail})"
    os.write(fd, detail.encode())
    os.close(fd)
    log("effect", tool=kind, key=key, applied=True)
    return f"{kind}: done ({detail})"


class RecordInput(BaseModel):
    fact: str


class RecordTool(BaseTool):
    name: str = "record"
    description: str = "Record a fact in the ledger. Has a side effect."
    args_schema: type[BaseModel] = RecordInput

    def _run(self, fact: str) -> str:
        return apply_effect("record", fact)


class SendInput(BaseModel):
    to: str
    body: str


class SendTool(BaseTool):
    name: str = "send"
    description: str = "Send a message to a client. Has a side effect."
    args_schema: type[BaseModel] = SendInput

    def _run(self, to: str, body: str) -> str:
        return apply_effect("send", f"{to}: {body}")


class LoggedLLM(ScriptedLLM):
    """The scripted model, logging each live call with the execution making it."""

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        log("llm")
        return super().call(messages, *args, **kwargs)


def chaos(inputs: dict[str, str]) -> Crew:
    n = inputs.get("n", "0")
    clerk = Agent(
        role="Clerk",
        goal="Record, tell the client, report",
        backstory="Careful.",
        llm=LoggedLLM(
            model="scripted/chaos",
            label="Report",
            tool_plan=[
                ("record", {"fact": f"fact {n}"}),
                ("send", {"to": f"client-{n}", "body": f"update {n}"}),
            ],
        ),
        tools=[RecordTool(), requires_approval(SendTool())],
        verbose=False,
    )
    task = Task(
        description=f"Record fact {n}, tell client-{n}, report",
        expected_output="A report",
        agent=clerk,
        human_input=True,
    )
    return Crew(agents=[clerk], tasks=[task], process=Process.sequential)
