"""Shared pieces of the benchmarks: the bench crews, a throwaway database, process figures.

The crews are real CrewAI crews on :class:`~crew_runtime.offline.scripted_llm.ScriptedLLM`, so the
real agent loop and ``human_input`` machinery run; only the provider is scripted. Their
factories live here because Countersign loads factories by ``module:function`` name; the
benchmarks put ``bench/`` on ``sys.path`` and name them ``_common:<factory>``.

Importing this module imports ``crew_runtime`` first: it sets CrewAI's telemetry opt-outs
before ``crewai`` is imported.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import datetime as dt
import os
import platform
import secrets
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
for _path in (str(ROOT), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

for _name, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
}.items():
    os.environ.setdefault(_name, _value)

import crew_runtime  # noqa: E402  (sets the rest of the opt-outs before crewai loads)

# isort: split
from crewai import Agent, Crew, Process, Task  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from crew_runtime.offline.scripted_llm import ScriptedLLM  # noqa: E402
from storage import Store  # noqa: E402

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

# Set by the resume benchmark to simulate a provider's latency in every crew it builds.
LLM_DELAY = {"seconds": 0.0}


# ---------------------------------------------------------------------------- crews


class ProbeLLM(ScriptedLLM):
    """The scripted model, counting the calls that reach it and timing the one of interest.

    Only live calls reach it: replayed turns are served from the journal by the runtime.
    """

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        PROBE.called()
        return super().call(messages, *args, **kwargs)


class _Probe:
    """Counts model calls in this process and notes when call number ``mark`` started.

    "When" is both wall time (``perf_counter``) and this process's CPU time
    (``process_time``, all threads): on a noisy machine CPU time varies less.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._marked = threading.Event()
        self.mark = 1
        self.marked_at: tuple[float, float] | None = None
        self.calls = 0

    def reset(self, mark: int = 1) -> None:
        with self._lock:
            self._marked.clear()
            self.mark = mark
            self.marked_at = None
            self.calls = 0

    def called(self) -> None:
        at = (time.perf_counter(), time.process_time())
        with self._lock:
            self.calls += 1
            if self.calls == self.mark:
                self.marked_at = at
                self._marked.set()

    def wait(self, timeout: float) -> tuple[float, float]:
        """When call number ``mark`` started: ``(perf_counter(), process_time())``."""
        if not self._marked.wait(timeout):
            raise TimeoutError(f"LLM call {self.mark} never came")
        assert self.marked_at is not None
        return self.marked_at


PROBE = _Probe()


def _agent(label: str, tools: list[BaseTool] | None = None, plan: list[Any] | None = None) -> Agent:
    llm = ProbeLLM(
        model=f"scripted/{label.lower()}",
        label=label,
        tool_plan=plan or [],
        delay=LLM_DELAY["seconds"],
    )
    return Agent(
        role=f"{label} writer",
        goal="Write what the task asks",
        backstory="A careful writer.",
        llm=llm,
        tools=tools or [],
        max_iter=1000,  # the research crew's long tasks run past CrewAI's default of 25
        verbose=False,
    )


def draft(inputs: dict[str, str]) -> Crew:
    """One agent, one task whose output a person reviews (``Task(human_input=True)``).

    The cheapest real path to a suspended run: one LLM call, then a task review.
    """
    agent = _agent("Draft")
    task = Task(
        description="Draft a note about {topic}",
        expected_output="A short note",
        agent=agent,
        human_input=True,
    )
    return Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=False)


class LookupInput(BaseModel):
    query: str


class LookupTool(BaseTool):
    name: str = "lookup"
    description: str = "Look a fact up."
    args_schema: type[BaseModel] = LookupInput

    def _run(self, query: str) -> str:
        return f"a fact about {query}"


def research(inputs: dict[str, str]) -> Crew:
    """Three tasks of ``lookups`` tool calls (9 by default) and a final answer each, the last
    one reviewed: 30 LLM turns (and 27 tool turns) before its review opens, by default.
    """
    plan = [("lookup", {"query": "{subject} #{step}"})] * int(inputs.get("lookups", 9))
    agents = [_agent(label, [LookupTool()], plan) for label in ("Notes", "Outline", "Article")]
    tasks: list[Task] = []
    for n, agent in enumerate(agents):
        tasks.append(
            Task(
                description=f"Step {n + 1} on {{topic}}",
                expected_output="A text",
                agent=agent,
                context=list(tasks),
                human_input=n == len(agents) - 1,
            )
        )
    return Crew(agents=agents, tasks=tasks, process=Process.sequential, verbose=False)


def write_config(directory: Path) -> Path:
    path = directory / "countersign.toml"
    path.write_text(
        '[crews.draft]\nfactory = "_common:draft"\n\n'
        '[crews.research]\nfactory = "_common:research"\n'
    )
    return path


# ------------------------------------------------------------------------- database


def add_database_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        default=None,
        help="SQLAlchemy URL; default a SQLite file in a temp dir. "
        f"A PostgreSQL URL (e.g. {PG_DEFAULT}) gets a schema of its own, dropped at the end.",
    )


@contextlib.contextmanager
def database(url: str | None) -> Iterator[tuple[str, Path]]:
    """Yield ``(url, workdir)``: a fresh SQLite file, or a fresh schema of a PostgreSQL db."""
    with tempfile.TemporaryDirectory(prefix="countersign-bench-") as tmp:
        workdir = Path(tmp)
        if url is None or url.startswith("sqlite"):
            yield (url or f"sqlite:///{workdir / 'bench.db'}"), workdir
            return
        from sqlalchemy import create_engine, text

        schema = f"bench_{secrets.token_hex(4)}"
        admin = create_engine(url)
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        sep = "&" if "?" in url else "?"
        try:
            yield f"{url}{sep}options=-csearch_path%3D{schema}", workdir
        finally:
            with admin.begin() as conn:
                conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
            admin.dispose()


def backend(url: str) -> str:
    return "PostgreSQL" if url.startswith("postgres") else "SQLite"


def open_store(url: str) -> Store:
    return Store.open(url)


# ---------------------------------------------------------------------- measuring


def proc_status() -> dict[str, int]:
    """Threads and VmRSS (KiB) of this process, from /proc/self/status."""
    wanted = {"Threads", "VmRSS"}
    found: dict[str, int] = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in wanted:
                found[key] = int(value.split()[0])
    return found


def fill_crewai_event_pool() -> int:
    """Start every thread of CrewAI's event-handler pool now; returns the pool's size.

    CrewAI's event bus runs sync handlers in a ``ThreadPoolExecutor(max_workers=10)`` whose
    threads start on demand (events/event_bus.py:179), as many as concurrent events needed.
    Started up front, their coming and going is not mistaken for a cost of waiting runs.
    """
    from crewai.events.event_bus import crewai_event_bus as bus

    bus._ensure_executor_initialized()
    pool = bus._sync_executor
    size = pool._max_workers
    barrier = threading.Barrier(size + 1)
    for _ in range(size):
        pool.submit(barrier.wait, 30)
    barrier.wait(30)
    return size


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def trim() -> None:
    """Return freed heap pages to the OS (glibc), so RSS shows what is still in use."""
    with contextlib.suppress(AttributeError):
        _libc.malloc_trim(0)


def median(values: list[float]) -> float:
    return statistics.median(values)


def p99(values: list[float]) -> float:
    """Nearest-rank 99th percentile (the largest of fewer than 100 values)."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 99 // 100) - 1)]


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured markdown table (readable as plain text too)."""
    cells = [headers, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep, *[line(r) for r in cells[1:]]])


def machine() -> str:
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "?")
    ram_kib = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
        ram_kib = next((int(ln.split()[1]) for ln in fh if ln.startswith("MemTotal")), 0)
    import crewai

    return (
        f"{os.cpu_count()} CPU ({cpu}), {ram_kib / 1024 / 1024:.1f} GiB RAM, "
        f"Python {platform.python_version()}, crewai {crewai.__version__}, "
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC"
    )


__all__ = [
    "LLM_DELAY",
    "PROBE",
    "crew_runtime",
]
