"""The Store: every read and compare-and-set transition of Countersign's state.

One synchronous API: workers call it directly, the async bot through one
``asyncio.to_thread`` boundary. Each public method is one transaction. Its methods live with
their concern: runs and leases (``storage.runs``), reviews and decisions (``storage.reviews``;
approvals counted in ``storage.approvals``), claims (``storage.claims``),
standing approvals (``storage.standing``), the journal (``storage.journal``), the outbox
(``storage.outbox``), runs' live progress (``storage.progress``), retention
(``storage.retention``), the audit trail (``storage.audit``), delegations while away
(``storage.delegations``), the app's Home tab (``storage.home``), the HTTP API's tokens
(``storage.tokens``) and its pages of reviews (``storage.pages``), and webhook events
(``storage.webhooks``). Each method lives in one part and no part calls another; the table in
docs/architecture.md ("The Store's parts") names every method's home.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from storage import migrate, tallies
from storage.audit import AuditStore
from storage.base import Clock, utc_now
from storage.claims import ClaimStore
from storage.delegations import DelegationStore
from storage.engine import checkpoint as engine_checkpoint
from storage.engine import make_engine, write_transaction
from storage.home import HomeStore
from storage.journal import JournalStore
from storage.outbox import OutboxStore
from storage.pages import ReviewPages
from storage.progress import ProgressStore
from storage.requests import RequestStore
from storage.retention import RetentionStore
from storage.reviews import ReviewStore
from storage.runs import RunStore
from storage.standing import StandingStore
from storage.tokens import TokenStore
from storage.wakeups import Wakeups
from storage.webhooks import WebhookStore


class Store(
    RunStore,
    ReviewStore,
    ClaimStore,
    StandingStore,
    JournalStore,
    OutboxStore,
    RetentionStore,
    AuditStore,
    DelegationStore,
    HomeStore,
    TokenStore,
    ReviewPages,
    WebhookStore,
    ProgressStore,
    RequestStore,
):
    """Durable state of Countersign. Build one per process with :meth:`open`."""

    @classmethod
    def open(cls, url: str, *, clock: Clock = utc_now, upgrade: bool = True) -> Store:
        """Connect to ``url`` and, unless told not to, bring the schema up to date."""
        store = cls(make_engine(url), clock)
        if upgrade:
            store.upgrade()
        return store

    def upgrade(self) -> None:
        migrate.upgrade(self.engine)

    def checkpoint(self) -> None:
        """On SQLite, fold the write-ahead log into the database. Commits never do it
        themselves (it costs a commit ~100 ms): a long-lived process calls this every few
        seconds, off the paths where a person waits."""
        engine_checkpoint(self.engine)

    def fold_counts(self) -> int:
        """Fold the counts kept as they change (``storage.tallies``) if they have grown; how
        many rows were folded. A long-lived process calls it now and then, so that a metrics
        scrape sums a few rows even where nobody scrapes for a while."""
        with self.engine.connect() as conn:
            found, summed = tallies.counts(conn)
        if not tallies.needs_fold(found, summed):
            return 0
        with write_transaction(self.engine) as conn:
            return tallies.fold(conn)

    def wakeups(self, handlers: Mapping[str, Callable[[], None]]) -> Wakeups:
        """A listener calling ``handlers[topic]`` when a transaction anywhere notifies
        ``topic`` (``storage.wakeups``: PostgreSQL only; polling stays the fallback)."""
        return Wakeups(self.engine, handlers)

    def close(self) -> None:
        self.engine.dispose()
