"""What deciding gated calls by rule costs: CEL evaluation per call under a rule set of 50.

The claim: a crew's rules (``crew_runtime.rules``, CEL through cel-python) decide a gated
call in well under a millisecond (goal: p99 < 1 ms per call), small next to the call's own
journal write.

A crew (``--runs`` runs of ``--calls`` gated ``pay`` calls each, 20 x 50 = 1,000 by default,
one model turn per call, on the scripted model) runs in real workers of this process under
50 rules of ``pay``: 49 that do not apply to these calls (other payees, larger amounts),
tried first, then ``small-payments`` (``args.amount < 100``), which approves every one. So
every call evaluates every rule that names its tool, the worst order for the rule set. Timed:
each call's evaluation of the rules (``RuleSet.match``, the worker's own call, measured
around it), and the runs end to end. Checked: every call was paid once, each decided by the
rule (a journal entry and an audit record each), and nobody was asked.

Run: ``.venv/bin/python bench/rules.py [--runs 20] [--calls 50] [--database-url URL]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import _common as c  # first: sets CrewAI's opt-outs, puts the repo on sys.path
from crewai import Agent, Crew, Process, Task
from crewai.tools import BaseTool
from pydantic import BaseModel

from crew_runtime import Countersign, Worker, WorkerSettings, load_config
from crew_runtime import rules as rules_module
from storage import RunStatus


class PayInput(BaseModel):
    amount: int
    to: str


class PayTool(BaseTool):
    name: str = "pay"
    description: str = "Pay a supplier."
    args_schema: type[BaseModel] = PayInput

    def _run(self, amount: int, to: str) -> str:
        return f"paid {amount} to {to}"


def payments(inputs: dict[str, str]) -> Crew:
    """One agent making ``calls`` gated payments, one model turn each."""
    plan = [("pay", {"amount": 5 + n % 90, "to": "ACME"}) for n in range(int(inputs["calls"]))]
    llm = c.ScriptedLLM(model="scripted/clerk", label="Receipt", tool_plan=plan)
    clerk = Agent(
        role="Clerk",
        goal="Pay suppliers",
        backstory="Careful with money.",
        llm=llm,
        tools=[PayTool()],
        max_iter=len(plan) + 5,
        verbose=False,
    )
    task = Task(description="Pay the invoices", expected_output="A receipt", agent=clerk)
    return Crew(agents=[clerk], tasks=[task], process=Process.sequential, verbose=False)


def rule_lines(count: int) -> list[str]:
    """``count`` rules: ``count - 1`` that these calls never meet, then the one they do."""
    lines = []
    for n in range(count - 1):
        if n % 3 == 0:
            when = f"args.to == 'SUPPLIER{n}' && args.amount > {n}"
        elif n % 3 == 1:
            when = f"args.amount >= {10_000 + n * 100}"
        else:
            when = f"!args.to.startsWith('AC') && size(args.to) > {n}"
        lines.append(
            f'  {{ name = "r{n}", tool = "pay", when = "{when}", decide = "reject", '
            f'reason = "rule {n}" }},'
        )
    lines.append(
        '  { name = "small-payments", tool = "pay", when = "args.amount < 100", '
        'decide = "approve" },'
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50, help="gated calls a run makes")
    parser.add_argument("--rules", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=2)
    c.add_database_arg(parser)
    args = parser.parse_args()

    timings: list[float] = []
    measured = rules_module.RuleSet.match

    def timed(self: rules_module.RuleSet, *a: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return measured(self, *a, **kw)
        finally:
            timings.append(time.perf_counter() - started)

    rules_module.RuleSet.match = timed  # type: ignore[method-assign]
    with c.database(args.database_url) as (url, workdir):
        path = workdir / "countersign.toml"
        path.write_text(
            '[crews.payments]\nfactory = "rules:payments"\napproval_tools = ["pay"]\n'
            'inputs = ["calls"]\nrules = [\n' + "\n".join(rule_lines(args.rules)) + "\n]\n"
        )
        config = load_config(path)
        store = c.open_store(url)
        service = Countersign(store, config)
        runs = [service.start_run("payments", {"calls": str(args.calls)}) for _ in range(args.runs)]
        started = time.perf_counter()
        Worker(
            store,
            config,
            WorkerSettings(concurrency=args.concurrency, poll=timedelta(seconds=0.05)),
        ).run(until_idle=True)
        elapsed = time.perf_counter() - started
        for run in runs:
            done = store.get_run(run.id)
            assert done.status == RunStatus.SUCCEEDED, (done.status, done.error)
            assert store.list_reviews(run_id=run.id, status=None) == [], "a person was asked"
            journal = store.load_journal(run.id)
            ruled = [e for e in journal if e.kind == "rule"]
            paid = [e for e in journal if e.kind == "tool"]  # each call, run once
            assert len(ruled) == len(paid) == args.calls, (len(ruled), len(paid))
        total = args.runs * args.calls
        now = datetime.now(UTC).replace(tzinfo=None)
        audited = [
            r
            for r in store.audit_records(since=now - timedelta(days=1), until=now)
            if r.rule == "small-payments"
        ]
        assert len(audited) == total, len(audited)
        store.close()

    assert len(timings) == total, (len(timings), total)
    ms = sorted(t * 1000 for t in timings)
    p50, p99 = statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(c.machine())
    print(
        f"{c.backend(url)}, {args.runs} runs x {args.calls} gated calls = {total}, "
        f"{args.rules} rules ({args.rules} evaluated per call), concurrency {args.concurrency}"
    )
    print(
        c.table(
            ["rule evaluation per call", "p50 ms", "p99 ms", "max ms", "runs end to end s"],
            [["", f"{p50:.3f}", f"{p99:.3f}", f"{ms[-1]:.3f}", f"{elapsed:.1f}"]],
        )
    )
    print(f"goal p99 < 1 ms: {'met' if p99 < 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
