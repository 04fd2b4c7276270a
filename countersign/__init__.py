"""Countersign: durable human review for CrewAI crews, from Slack.

The names a crew imports, all from here::

    from countersign import ask_human, idempotency_key, requires_approval

- :func:`ask_human` (an :class:`AskHumanTool`): a tool an agent calls to ask the run's
  reviewers a question; the run waits for the answer, in any worker, for as long as it takes.
- :func:`requires_approval` (a :class:`GatedTool`): a tool that never runs before a reviewer
  approved that exact call.
- :func:`idempotency_key`: the key a side-effecting tool passes to the system it calls, the
  same when a resumed run calls the tool again.
- :class:`ScriptedLLM`: the offline model of the demo and of tests, for a crew tried without
  a provider's key.
- :class:`CountersignError`: the root of every error Countersign raises.

Nothing else is public: the rest of the installed package (``countersign.bot``,
``countersign.crew_runtime``, ``countersign.storage``, ``countersign.sandbox``) is
Countersign's own and changes without notice. Names are loaded on first use, so that
``import countersign`` (and the ``countersign`` command) does not pay for ``import crewai``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import crew_runtime  # sets CrewAI's opt-outs before crewai is imported (crew_runtime._env)

if TYPE_CHECKING:
    from crew_runtime.context import idempotency_key
    from crew_runtime.errors import CountersignError
    from crew_runtime.gates import GatedTool, requires_approval
    from crew_runtime.offline.scripted_llm import ScriptedLLM
    from crew_runtime.questions import AskHumanTool, ask_human

__all__ = [
    "AskHumanTool",
    "CountersignError",
    "GatedTool",
    "ScriptedLLM",
    "ask_human",
    "idempotency_key",
    "requires_approval",
]

# The names crew_runtime itself exports (and loads lazily); ScriptedLLM is the one that is not.
_FROM_RUNTIME = frozenset(__all__) - {"ScriptedLLM"}


def __getattr__(name: str) -> Any:
    if name in _FROM_RUNTIME:
        return getattr(crew_runtime, name)
    if name == "ScriptedLLM":
        from crew_runtime.offline.scripted_llm import ScriptedLLM

        return ScriptedLLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
