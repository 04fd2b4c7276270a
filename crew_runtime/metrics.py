"""Countersign's Prometheus metrics, the one module that imports ``prometheus_client``.

Two kinds:

- **Counted in a process** (:data:`REGISTRY`): what this process did, counted as it happens.
  A worker counts its executions (by how they ended), the LLM and tool calls they made live
  or served from the journal, and the leases it lost; whoever records a decision observes its
  time to decision; ``serve`` counts the reminders and escalations its sweep sends, the
  Slack API calls that failed and its attempts to deliver webhook events. Each process
  serves its own (``serve``'s ``/metrics``, a worker's ``--metrics-port``); Prometheus adds
  them up across processes.
- **Read from the database at scrape time** (:class:`DatabaseCollector`): runs by crew and
  status, pending reviews by crew and age, the inbox's and outbox's backlog. Only ``serve``
  serves these (one deployment, one reading), from ``storage.stats``' aggregate queries.

Importing this module does not import CrewAI.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from storage import Review, RunStatus, Store
from storage.stats import AGE_BUCKETS, OLDEST_BUCKET, Backlog, read_stats

log = logging.getLogger(__name__)

__all__ = [
    "CONTENT_TYPE",
    "REGISTRY",
    "DatabaseCollector",
    "Registry",
    "count_execution",
    "count_executor_failure",
    "count_given_up",
    "count_slack_error",
    "count_started",
    "count_sweep",
    "count_webhook",
    "database_registry",
    "exposition",
    "observe_decision",
]

CONTENT_TYPE = CONTENT_TYPE_LATEST
Registry = CollectorRegistry  # for other layers' annotations: they do not import prometheus

REGISTRY = CollectorRegistry()
"""What this process counted (see the module's docstring)."""

EXECUTIONS = Counter(
    "countersign_executions",
    "Executions of runs that ended in this worker, by crew and outcome (a run status, "
    "lease_lost, or error: the executor itself failed)",
    ["crew", "outcome"],
    registry=REGISTRY,
)
EXECUTIONS_STARTED = Counter(
    "countersign_executions_started",
    "Executions this worker started (each claim of a run is an attempt), by crew",
    ["crew"],
    registry=REGISTRY,
)
LEASE_LOSSES = Counter(
    "countersign_lease_losses",
    "Executions stopped because their run's lease was lost (taken over, cancelled), by crew",
    ["crew"],
    registry=REGISTRY,
)
LLM_CALLS = Counter(
    "countersign_llm_calls",
    "LLM calls of executions, by crew and source: live (the model was asked) or replayed "
    "(served from the journal); counted when the execution ends",
    ["crew", "source"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "countersign_tool_calls",
    "Tool calls of executions, by crew and source: live or replayed from the journal",
    ["crew", "source"],
    registry=REGISTRY,
)
RULE_DECISIONS = Counter(
    "countersign_rule_decisions",
    "Gated tool calls decided by a configured rule, not a person, by crew, rule and decision "
    "(approve or reject)",
    ["crew", "rule", "decision"],
    registry=REGISTRY,
)
TIME_TO_DECISION = Histogram(
    "countersign_time_to_decision_seconds",
    "From a review's opening to a person's decision, by crew and review kind",
    ["crew", "kind"],
    buckets=(10, 60, 300, 900, 3600, 4 * 3600, 8 * 3600, 86400, 3 * 86400, 7 * 86400),
    registry=REGISTRY,
)
SWEPT = {
    name: Counter(
        f"countersign_{name}",
        f"{what}, announced in the run's thread by this process's review sweep",
        registry=REGISTRY,
    )
    for name, what in (
        ("reminders", "Reminders of pending reviews"),
        ("escalations", "Escalations of pending reviews"),
        ("expiries", "Reviews expired unanswered"),
    )
}
SLACK_API_ERRORS = Counter(
    "countersign_slack_api_errors",
    "Slack Web API calls that failed, by method and error (Slack's error code, or the "
    "exception's class when no answer came)",
    ["method", "error"],
    registry=REGISTRY,
)
OUTBOX_GIVEN_UP = Counter(
    "countersign_outbox_given_up",
    "Outbox rows given up on because Slack refused them for good (not retried), by row kind "
    "and Slack's error code",
    ["kind", "error"],
    registry=REGISTRY,
)

WEBHOOK_DELIVERIES = Counter(
    "countersign_webhook_deliveries",
    "Attempts to deliver a webhook event, by crew and outcome: delivered, retry (a network "
    "error, a timeout, a 408, 429 or 5xx: tried again later), gave_up (attempts or time "
    "spent) or refused (any other answer: not tried again)",
    ["crew", "outcome"],
    registry=REGISTRY,
)

# The sweep's counts (storage's Store.sweep_reviews) by the counter each one goes to.
_SWEEP_KEYS = {"reminded": "reminders", "escalated": "escalations", "expired": "expiries"}


def count_execution(crew: str, status: RunStatus | None, stats: Mapping[str, int]) -> None:
    """An execution ended: in ``status``, or None when its lease was lost."""
    if status is None:
        LEASE_LOSSES.labels(crew).inc()
    EXECUTIONS.labels(crew, "lease_lost" if status is None else status.value).inc()
    for source in ("live", "replayed"):
        LLM_CALLS.labels(crew, source).inc(stats.get(f"llm_{source}", 0))
        TOOL_CALLS.labels(crew, source).inc(stats.get(f"tool_{source}", 0))


def count_executor_failure(crew: str) -> None:
    """The executor itself raised (a bug): the execution ended with no outcome."""
    EXECUTIONS.labels(crew, "error").inc()


def count_started(crew: str) -> None:
    EXECUTIONS_STARTED.labels(crew).inc()


def observe_decision(crew: str, review: Review) -> None:
    """A person's decision was recorded on ``review`` (decided now, not a replayed request)."""
    if review.decided_at is not None:
        waited = (review.decided_at - review.created_at).total_seconds()
        TIME_TO_DECISION.labels(crew, review.kind.value).observe(max(waited, 0.0))


def count_sweep(done: Mapping[str, int]) -> None:
    """What one review sweep did (``Store.sweep_reviews``' counts)."""
    for key, name in _SWEEP_KEYS.items():
        SWEPT[name].inc(done.get(key, 0))


def count_slack_error(method: str, error: str) -> None:
    SLACK_API_ERRORS.labels(method, error).inc()


def count_rule(crew: str, rule: str, decision: str) -> None:
    RULE_DECISIONS.labels(crew, rule, decision).inc()


def count_given_up(kind: str, error: str) -> None:
    OUTBOX_GIVEN_UP.labels(kind, error).inc()


def count_webhook(crew: str, outcome: str) -> None:
    WEBHOOK_DELIVERIES.labels(crew, outcome).inc()


class DatabaseCollector(Collector):
    """Gauges read from the database at each scrape (``storage.stats``).

    ``countersign_database_up`` says whether the reading worked; when it did not, the
    other gauges are left out of that scrape rather than shown as zeros.
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "countersign_database_up", "Whether this scrape could read the database (1 or 0)"
        )
        try:
            stats = read_stats(self.store)
        except Exception as exc:  # the database's failure, whatever the driver calls it
            log.warning("metrics: cannot read the database (%s)", type(exc).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        # Every crew with a run gets every series, zeros included: a series that vanished
        # when its count fell to zero would read as "no data", not as none waiting.
        crews = sorted({crew for crew, _status in stats.runs})
        runs = GaugeMetricFamily(
            "countersign_runs", "Runs by crew and status", labels=["crew", "status"]
        )
        for crew in crews:
            for status in RunStatus:
                runs.add_metric([crew, status.value], stats.runs.get((crew, status.value), 0))
        yield runs
        yield from _pending(crews, stats.pending_reviews, stats.oldest_pending, stats.now)
        yield from _backlog(
            "inbox", "Slack requests recorded, not yet handled", stats.inbox, stats.now
        )
        yield from _backlog(
            "outbox", "Slack messages committed, not yet delivered", stats.outbox, stats.now
        )


def _pending(
    crews: Iterable[str],
    counts: Mapping[tuple[str, str], int],
    oldest: Mapping[str, datetime],
    now: datetime,
) -> Iterator[Metric]:
    ages = [label for label, _ in AGE_BUCKETS] + [OLDEST_BUCKET]
    pending = GaugeMetricFamily(
        "countersign_pending_reviews",
        f"Reviews waiting for a person, by crew and age ({', '.join(ages)})",
        labels=["crew", "age"],
    )
    waited = GaugeMetricFamily(
        "countersign_oldest_pending_review_seconds",
        "How long the oldest pending review of each crew has waited (0: none waits)",
        labels=["crew"],
    )
    for crew in crews:
        for age in ages:
            pending.add_metric([crew, age], counts.get((crew, age), 0))
        opened = oldest.get(crew)
        waited.add_metric([crew], 0.0 if opened is None else (now - opened).total_seconds())
    yield pending
    yield waited


def _backlog(name: str, what: str, backlog: Backlog, now: datetime) -> Iterator[Metric]:
    yield GaugeMetricFamily(f"countersign_{name}_backlog", what, value=backlog.count)
    oldest = 0.0 if backlog.oldest is None else (now - backlog.oldest).total_seconds()
    yield GaugeMetricFamily(
        f"countersign_{name}_oldest_seconds",
        f"Age of the oldest of the {name}'s rows not yet done (0: none)",
        value=oldest,
    )


def database_registry(store: Store) -> Registry:
    """A registry of the database's gauges, read from ``store`` at each scrape."""
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(store))
    return registry


def exposition(registries: Iterable[Registry]) -> bytes:
    """The registries' metrics in Prometheus' text format, one after the other."""
    return b"".join(generate_latest(registry) for registry in registries)
