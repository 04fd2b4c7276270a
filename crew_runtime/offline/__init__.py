"""The offline model: :class:`~crew_runtime.offline.scripted_llm.ScriptedLLM`, a CrewAI LLM
that follows a script instead of calling a provider (the demo's crews, tests, benchmarks).

A product feature on top of the runtime, not part of its core: no other ``crew_runtime``
module imports it (``tests/house/test_architecture.py`` checks). The executor recognises it by
its class's ``offline = True`` marker, which any other offline model may set too.
"""
