"""A test bench for durable runs: a config, a database, and worker processes to start and kill.

Workers run as real ``countersign worker`` processes, so a pause in one process
and a resume in another is what the tests see; SIGKILL is a real kill.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from crew_runtime import Countersign, Worker, WorkerSettings, load_config
from storage import DecisionKind, Review, Run, RunStatus, Store
from storage.schema import journal
from tests.support.crews import effects
from tests.support.zygote import Forked, Zygote

ROOT = Path(__file__).resolve().parents[2]

# For a test whose subject is a crew's shape or a provider, not storage: it runs on SQLite
# only. Its storage calls are the same code that the storage, fencing and crash tests run
# on both backends, and running it twice would only double the suite's time.
ON_SQLITE = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)

CONFIG = """
[crews.writer]
factory = "tests.support.crews:writer"
description = "Outline then article, both reviewed"

[crews.research]
factory = "tests.support.crews:research"
description = "Searches, asks a human, publishes"

[crews.plain]
factory = "tests.support.crews:plain"
description = "One task, one tool, no human"

[crews.broken]
factory = "tests.support.crews:broken"

[crews.trilogy]
factory = "tests.support.crews:trilogy"
description = "Three reviewed tasks, each on the one before"

[flows.article]
factory = "tests.support.crews:article_flow"
description = "A CrewAI Flow reviewed with @human_feedback"

[crews.payments]
factory = "tests.support.crews:payments"
description = "Pays a supplier; large payments are gated"

[crews.gated_research]
factory = "tests.support.crews:research"
description = "The research crew with publish gated by configuration"
approval_tools = ["publish"]

[crews.newsletter]
factory = "tests.support.crews:newsletter"
description = "Sends a newsletter with a slow tool, once per idempotency key"

[crews.verbose]
factory = "tests.support.crews:verbose"
description = "A verbose crew that asks a human (or whose model fails)"

[crews.parallel_payments]
factory = "tests.support.crews:parallel_payments"
description = "One native model turn makes two gated payments"

[crews.delegation]
factory = "tests.support.crews:delegation"
description = "A lead delegates to an analyst whose work pauses"

[crews.parallel]
factory = "tests.support.crews:parallel"
description = "Two parallel tasks, one paused at a gate, then a task joining them"

[crews.swallowing]
factory = "tests.support.crews:swallowing"
description = "A task callback that swallows the pause of the agent it asks"

[crews.unstorable]
factory = "tests.support.crews:unstorable"
description = "Drafts holding a character a database may refuse"
"""


@dataclass
class Bench:
    tmp: Path
    db_url: str
    store: Store = field(init=False)
    service: Countersign = field(init=False)

    def __post_init__(self) -> None:
        self.config_path = self.tmp / "countersign.toml"
        self.config_path.write_text(CONFIG)
        self.effects_path = self.tmp / "effects.jsonl"
        self.llm_log = self.tmp / "llm.jsonl"
        self.config = load_config(self.config_path)
        self._spawned = 0
        self.store = Store.open(self.db_url)  # the db_url fixture's: at the migrations' head
        self.service = Countersign(self.store, self.config)
        os.environ["COUNTERSIGN_TEST_EFFECTS"] = str(self.effects_path)
        os.environ["COUNTERSIGN_SCRIPTED_LOG"] = str(self.llm_log)

    def add_crews(self, config: str) -> None:
        """Register more crews (a test module's own TOML tables) next to the standard ones."""
        self.config_path.write_text(CONFIG + config)
        self.config = load_config(self.config_path)
        self.service = Countersign(self.store, self.config)

    def close(self) -> None:
        self.store.close()
        os.environ.pop("COUNTERSIGN_TEST_EFFECTS", None)
        os.environ.pop("COUNTERSIGN_SCRIPTED_LOG", None)

    # -- runs and reviews

    def start(self, crew: str, **inputs: str) -> Run:
        return self.service.start_run(crew, inputs, started_by="U_TEST")

    def run(self, run_id: str) -> Run:
        return self.store.get_run(run_id)

    def pending(self, run_id: str) -> Review:
        (review,) = [r for r in self.store.list_reviews(run_id=run_id)]
        return review

    def decide(
        self,
        run_id: str,
        kind: str,
        text: str | None = None,
        by: str = "U1",
        by_name: str | None = None,
    ) -> Review:
        review_id = self.pending(run_id).id
        return self.service.decide(review_id, DecisionKind(kind), text, by=by, by_name=by_name)

    # -- workers

    def work_here(self, concurrency: int = 1) -> Worker:
        """Run a worker in this process until nothing is left to do."""
        worker = Worker(
            self.store,
            self.config,
            WorkerSettings(concurrency=concurrency, poll=timedelta(seconds=0.05)),
        )
        worker.run(until_idle=True)
        return worker

    def worker_env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PYTHONPATH=str(ROOT),
            DATABASE_URL=self.db_url,
            COUNTERSIGN_CONFIG=str(self.config_path),
            COUNTERSIGN_TEST_EFFECTS=str(self.effects_path),
            COUNTERSIGN_SCRIPTED_LOG=str(self.llm_log),
        )
        env.update(extra)
        return env

    @staticmethod
    def cli_command() -> list[str]:
        return [sys.executable, "-m", "bot"]

    def spawn(self, *args: str, lease: float = 2.0, log: Path | None = None, **env: str) -> Forked:
        """A ``countersign worker`` process until idle, forked from the session's zygote (it
        has imported CrewAI already); what it prints goes to ``log``, or a file of its own."""
        argv = ["worker", "--until-idle", "--poll", "0.1", "--lease", str(lease), *args]
        if log is None:
            self._spawned += 1
            log = self.tmp / f"worker-{self._spawned}.log"
        return Zygote.fork(argv, self.worker_env(**env), self.tmp, log)

    def work(self, *args: str, timeout: float = 120, **env: str) -> int:
        """Run one worker process until idle; return its pid."""
        proc = self.spawn(*args, **env)
        out, _ = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, out
        return proc.pid

    def kill_when_holding(self, proc: Forked, at: str, timeout: float = 90) -> None:
        """SIGKILL the worker once it reports holding at ``at``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e["kind"] == "holding" and e["at"] == at for e in self.effects()):
                os.kill(proc.pid, signal.SIGKILL)
                proc.communicate(timeout=30)
                assert proc.returncode == -signal.SIGKILL
                return
            if proc.poll() is not None:
                raise AssertionError(f"worker exited before holding at {at}: {proc.stdout}")
            time.sleep(0.05)
        proc.kill()
        raise AssertionError(f"worker never held at {at}")

    # -- what happened

    def rewrite_model_turns(self, run_id: str, old: str, new: str) -> None:
        """The run's journaled model turns with ``old`` written ``new``: what a replay that
        differs from the recording (a journal edited, code changed since the pause) gives."""
        with self.store.engine.begin() as conn:
            for pos, payload in conn.execute(
                select(journal.c.pos, journal.c.payload).where(
                    journal.c.run_id == run_id, journal.c.kind == "llm"
                )
            ):
                changed = json.loads(json.dumps(payload).replace(old, new))
                conn.execute(
                    update(journal)
                    .where(journal.c.run_id == run_id, journal.c.pos == pos)
                    .values(payload=changed)
                )

    def effects(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in effects(self.effects_path) if kind is None or e["kind"] == kind]

    def llm_calls(self) -> list[dict[str, Any]]:
        if not self.llm_log.exists():
            return []
        return [json.loads(line) for line in self.llm_log.read_text().splitlines() if line]

    def llm_calls_by_pid(self) -> Counter[int]:
        return Counter(call["pid"] for call in self.llm_calls())

    def wait_status(self, run_id: str, *statuses: RunStatus) -> Run:
        run = self.run(run_id)
        assert run.status in statuses, (run.status, run.error)
        return run


ON_POSTGRES = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
