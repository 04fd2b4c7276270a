"""Shims for the CrewAI releases Countersign supports (pyproject.toml's range, tried on the
oldest, a middle and the newest by ``make compat``).

Each shim names the releases it is for and what it mends; :func:`install` applies them once,
before any crew is built (``crew_runtime.journal_llm`` calls it on import).

- 1.15.28 and before: CrewAI's default executor (``AgentExecutor``) lives in
  ``crewai.experimental.agent_executor``; 1.15.29 moved it to ``crewai.agents.agent_executor``
  (and dropped the old ``CrewAgentExecutor``). :data:`agent_executor` is that module, wherever
  it is. Its ``check_repeated_tool_call`` (CrewAI's count of repeated tool calls, which a
  snapshot keeps) exists from 1.15.29 only; before, there is nothing to count.
- Every supported release (1.15.19 to 1.15.30): ``crewai.llm._ensure_litellm``, the lazy
  import of LiteLLM, marks itself done *before* the import finishes, so a second thread
  building an ``LLM(..., is_litellm=True)`` meanwhile is told "the LiteLLM fallback package
  is not installed" and its crew fails to build. A worker builds crews in several threads at
  once; the shim makes the lazy import one at a time.
- Releases whose ``Flow`` (every agent executor is one) has ``flow_definition``: it builds a
  class's definition on first use by walking the class's ``__dict__`` and then stores it
  there, so a second thread building the same class's meanwhile fails ("dictionary changed
  size during iteration") and so does its run, in the first executions of a fresh worker.
  The shim builds each class's definition one at a time (a built one is read without a wait).
- Every supported release: when an agent executor's flow ends (every task, and the replayed
  turn of every resume) CrewAI deep-copies the executor's state, the whole conversation, only
  to dump the copy as JSON for its ``FlowFinishedEvent``; at 1,000 recorded turns that copy
  is ~2 ms of a resume (docs/benchmarks.md section 2). The shim dumps the state itself: the
  same JSON (a dump is a copy already), and CrewAI's own way when the state does not dump.
- pydantic before 2.13 (every supported CrewAI release pins ``pydantic<2.13``): a model whose
  schema is built on first use (deferred, or left incomplete by a forward reference) is
  rebuilt by whichever thread instantiates it first, and ``model_rebuild`` is not safe to run
  in two threads at once: one removes the validator the other has just built, and a third
  thread's instantiation meanwhile uses the parent class's ("BaseModel cannot be instantiated
  directly"). OpenAI's and LiteLLM's response types are such models, so a fresh worker's first
  concurrent model answers could fail their runs. The shim rebuilds models one at a time, as
  pydantic 2.13 does (its ``_rebuild_lock``).
- Every supported release: an agent executor's flow state is an ``AgentExecutorState``, which
  is not a ``FlowState``, so every executor's ``_create_initial_state`` declares a new class
  deriving from both and pydantic builds that class's schema anew: ~4.7 ms of CPU an executor
  (one an agent, at every kickoff and every resume: a quarter of a resume's CPU before its
  first live call, docs/benchmarks.md section 2), for a state the executor then replaces with
  a plain ``AgentExecutorState`` of its own. The shim declares the class once per state type
  and gives each executor a new instance of it, with its own id, as CrewAI does; a flow whose
  state is anything else is left to CrewAI.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import uuid
from collections.abc import Callable
from typing import Any

import crewai.llm as crewai_llm
import pydantic.main
from pydantic import BaseModel


def _agent_executor() -> Any:
    for name in ("crewai.agents.agent_executor", "crewai.experimental.agent_executor"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ImportError("this CrewAI release has no AgentExecutor module Countersign knows")


# The module of CrewAI's default agent executor (see above).
agent_executor: Any = _agent_executor()

_installed = False
_lock = threading.Lock()


def _one_at_a_time(ensure: Callable[[], bool]) -> Callable[[], bool]:
    guard = threading.Lock()

    @functools.wraps(ensure)
    def ensure_locked() -> bool:
        with guard:
            return ensure()

    ensure_locked.__countersign_shim__ = True  # type: ignore[attr-defined]
    return ensure_locked


def _flow_definitions_one_at_a_time(flow: Any) -> None:
    """Wrap ``flow.flow_definition`` (a classmethod) so that definitions are built under a
    lock; one already built (in the class's own ``__dict__``) is returned as CrewAI would."""
    build = vars(flow)["flow_definition"].__func__
    guard = threading.Lock()

    @functools.wraps(build)
    def flow_definition(cls: type) -> Any:
        built = cls.__dict__.get("_flow_definition")
        if built is not None:
            return built
        with guard:
            return build(cls)

    flow_definition.__countersign_shim__ = True  # type: ignore[attr-defined]
    flow.flow_definition = classmethod(flow_definition)


def _dumped_without_copy(serialize: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(serialize)
    def serialized(flow: Any) -> Any:
        state = getattr(flow, "_state", None)
        if isinstance(state, BaseModel):
            with contextlib.suppress(Exception):  # CrewAI's own fallback then, on its copy
                return state.model_dump(mode="json")
        return serialize(flow)

    serialized.__countersign_shim__ = True  # type: ignore[attr-defined]
    return serialized


def _rebuilds_one_at_a_time() -> None:
    """Wrap ``BaseModel.model_rebuild`` (a classmethod) in one reentrant lock: a rebuild may
    rebuild the models its fields name."""
    rebuild = vars(BaseModel)["model_rebuild"].__func__
    guard = threading.RLock()

    @functools.wraps(rebuild)
    def model_rebuild(cls: type[BaseModel], *args: Any, **kwargs: Any) -> Any:
        with guard:
            return rebuild(cls, *args, **kwargs)

    model_rebuild.__countersign_shim__ = True  # type: ignore[attr-defined]
    BaseModel.model_rebuild = classmethod(model_rebuild)  # type: ignore[method-assign,assignment]


def _state_classes_declared_once(executor: Any, flow_state: type[BaseModel]) -> None:
    """Wrap ``executor._create_initial_state``: a state type that is a model but not a
    ``FlowState`` gets its id-carrying subclass declared once, not once per executor."""
    create = executor._create_initial_state
    declared: dict[type, type[BaseModel]] = {}
    guard = threading.Lock()

    @functools.wraps(create)
    def create_initial_state(flow: Any) -> Any:
        state_type = getattr(flow, "_initial_state_t", None)
        if (
            flow.initial_state is not None
            or not isinstance(state_type, type)
            or not issubclass(state_type, BaseModel)
            or issubclass(state_type, flow_state)
            or flow._create_default_extension_state() is not None
        ):
            return create(flow)
        with guard:
            model = declared.get(state_type)
            if model is None:

                class StateWithId(flow_state, state_type):  # type: ignore[misc, valid-type]
                    pass

                model = declared[state_type] = StateWithId
        state = model()
        if not getattr(state, "id", None):
            object.__setattr__(state, "id", str(uuid.uuid4()))
        return state

    create_initial_state.__countersign_shim__ = True  # type: ignore[attr-defined]
    executor._create_initial_state = create_initial_state


def install() -> None:
    """Apply every shim this CrewAI release needs; idempotent."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        rebuild = vars(BaseModel)["model_rebuild"].__func__
        if not hasattr(pydantic.main, "_rebuild_lock") and not getattr(
            rebuild, "__countersign_shim__", False
        ):
            _rebuilds_one_at_a_time()
        ensure: Any = getattr(crewai_llm, "_ensure_litellm", None)
        if callable(ensure) and not getattr(ensure, "__countersign_shim__", False):
            crewai_llm._ensure_litellm = _one_at_a_time(ensure)
        executor = getattr(agent_executor, "AgentExecutor", None)
        serialize = getattr(executor, "_copy_and_serialize_state", None)
        if callable(serialize) and not getattr(serialize, "__countersign_shim__", False):
            executor._copy_and_serialize_state = _dumped_without_copy(serialize)  # type: ignore[union-attr]
        try:
            runtime: Any = importlib.import_module("crewai.flow.runtime")
            flow, flow_state = runtime.Flow, runtime.FlowState
        except (ModuleNotFoundError, AttributeError):
            return  # a release whose Flow builds no definition
        initial = getattr(executor, "_create_initial_state", None)
        if callable(initial) and not getattr(initial, "__countersign_shim__", False):
            _state_classes_declared_once(executor, flow_state)
        defined = vars(flow).get("flow_definition")
        if isinstance(defined, classmethod) and not getattr(
            defined.__func__, "__countersign_shim__", False
        ):
            _flow_definitions_one_at_a_time(flow)
