"""The tables. Times are naive UTC; JSON columns hold plain data only (never pickle)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

PERSON_LENGTH = 64
"""How long a person's name or id (who started a run, who decided) may be."""

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("crew", String(100), nullable=False),
    Column("inputs", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("output", Text),
    Column("error", Text),
    Column("divergence", Text),
    Column("started_by", String(PERSON_LENGTH)),
    # The request that started the run (a Slack request's key): a replay starts nothing.
    Column("request_key", String(200), unique=True),
    Column("channel", String(64)),
    Column("thread_ts", String(32)),
    Column("attempts", Integer, nullable=False, default=0),
    # Which worker holds the run (for people reading it), and the token of the claim being
    # executed: every write of an execution compares it, so an execution whose run was
    # claimed again (by another worker, or its own after a stall) can write nothing.
    Column("lease_owner", String(64)),
    Column("lease_token", String(32)),
    Column("lease_expires", DateTime),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
    Index("ix_runs_status_updated", "status", "updated_at"),
    Index("ix_runs_thread", "channel", "thread_ts"),
    # A crew's runs by status, with their ids (read from the index alone): whose reviews a
    # person may decide, counts by crew and status.
    Index("ix_runs_crew_status", "crew", "status", "id"),
    # A person's runs still going, for their App Home (storage.home).
    Index("ix_runs_started_by", "started_by", "status"),
)

reviews = Table(
    "reviews",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("stream", String(200), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("prompt", Text, nullable=False),
    Column("details", JSON, nullable=False),
    # Journal position when the review was opened: a divergence before it supersedes it.
    Column("journal_pos", Integer, nullable=False),
    Column("channel", String(64)),
    Column("message_ts", String(32)),
    Column("created_at", DateTime, nullable=False),
    Column("decided_at", DateTime),
    Column("remind_at", DateTime),
    Column("escalate_at", DateTime),
    Column("expires_at", DateTime),
    # What expires_at does (OnExpire): "approve", else (NULL, "reject") the review expires.
    Column("on_expire", String(16)),
    # Who is handling it (a claim, or a reassignment to them), and since when; anyone
    # allowed may still decide it.
    Column("claimed_by", String(PERSON_LENGTH)),
    Column("claimed_at", DateTime),
    # Where an approval chain (a rule's ``stages``) stands: the stage, from 0, whose
    # reviewers are asked now; 0 for a review without stages.
    Column("stage", Integer, nullable=False, server_default="0"),
    # The action digest of what it proposes (crew_runtime.digests); NULL for a question and
    # for rows from before digests.
    Column("digest", String(64)),
    # What a rule raised for it (storage.records.Raised, as JSON): its own reviewers or
    # approval chain, and its quorum; NULL where no rule did (its configuration decides).
    Column("reviewers", JSON),
    Index("ix_reviews_run", "run_id"),
    Index("ix_reviews_status", "status"),
    # The pending reviews, oldest first, without sorting every review that waits (with their
    # runs: /metrics counts the last week's by crew from the index alone); and by run, to
    # count a crew's from its waiting runs.
    Index(
        "ix_reviews_pending",
        "created_at",
        "id",
        "run_id",
        sqlite_where=Column("status") == "pending",
        postgresql_where=Column("status") == "pending",
    ),
    Index(
        "ix_reviews_pending_run",
        "run_id",
        sqlite_where=Column("status") == "pending",
        postgresql_where=Column("status") == "pending",
    ),
    # One live review per pause point; superseded ones stay for the audit trail.
    Index(
        "uq_reviews_point",
        "run_id",
        "kind",
        "stream",
        "seq",
        unique=True,
        sqlite_where=Column("status") != "superseded",
        postgresql_where=Column("status") != "superseded",
    ),
)

# Counts kept as they change (storage.tallies): a row per change, +1 or -1, of the runs of
# a crew in a status (``what`` is the status) or of its pending reviews (``pending_review``);
# a count is the sum of its rows, and folding replaces the rows by their sums.
tallies = Table(
    "tallies",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("crew", String(100), nullable=False),
    Column("what", String(16), nullable=False),
    Column("n", Integer, nullable=False),
)

decisions = Table(
    "decisions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # UNIQUE: one decision per review, whatever races the compare-and-set loses.
    Column(
        "review_id",
        String(32),
        ForeignKey("reviews.id", ondelete="CASCADE"),
        nullable=False,
        unique=True,
    ),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("text", Text),
    Column("original", Text),
    Column("details", JSON, nullable=False),
    Column("decided_by", String(PERSON_LENGTH), nullable=False),
    # The request that made the decision: replayed, it is answered as the first time.
    Column("request_key", String(200)),
    Column("created_at", DateTime, nullable=False),
    Index("ix_decisions_run", "run_id"),
    Index("ix_decisions_created", "created_at"),
    # A person's last decisions, for their App Home (storage.home).
    Index("ix_decisions_decided_by", "decided_by", "created_at"),
)

# Who decided what, when, kept when retention prunes the run (storage.retention): copied from
# the run's rows in the transaction that deletes them. No foreign key: it outlives the run.
audit = Table(
    "audit",
    metadata,
    Column("review_id", String(32), primary_key=True),
    Column("run_id", String(32), nullable=False),
    Column("crew", String(100), nullable=False),
    Column("review_kind", String(16), nullable=False),
    Column("decision", String(16), nullable=False),
    Column("decided_by", String(PERSON_LENGTH), nullable=False),
    Column("decided_at", DateTime, nullable=False),
    Column("feedback", Text),
    Column("approved_by", JSON),
    Column("approval_stages", JSON),
    Column("proposed_args", JSON),
    Column("approved_args", JSON),
    Column("executed_args", JSON),
    Column("channel", String(64)),
    Column("thread_ts", String(32)),
    Column("edit_diff", Text),
    # The action digest the decision covered, and the rule that made it (None: a person).
    Column("digest", String(64)),
    Column("rule", String(100)),
    Index("ix_audit_decided", "decided_at"),
)

# Approvals of a review that needs several (a crew's ``approvals_required``): one row per
# reviewer, so each counts once; the one that reaches the quorum also writes the decision.
approvals = Table(
    "approvals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("review_id", String(32), ForeignKey("reviews.id", ondelete="CASCADE"), nullable=False),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("decided_by", String(PERSON_LENGTH), nullable=False),
    Column("details", JSON, nullable=False),
    # The stage of an approval chain it was given at (its name); NULL without stages.
    Column("stage", String(100)),
    # The request that approved: replayed, it is answered as the first time.
    Column("request_key", String(200)),
    Column("created_at", DateTime, nullable=False),
    UniqueConstraint("review_id", "decided_by", name="uq_approvals_reviewer"),
    Index("ix_approvals_run", "run_id"),
)

# Claims and reassignments of reviews, and standing approvals granted and revoked, for the audit
# trail (``countersign audit export``). No foreign key: like ``audit`` it outlives its run, until
# ``keep_audit`` prunes it.
review_events = Table(
    "review_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("review_id", String(32), nullable=False),
    Column("run_id", String(32), nullable=False),
    Column("crew", String(100), nullable=False),
    Column("review_kind", String(16), nullable=False),
    Column("kind", String(16), nullable=False),  # ReviewEventKind
    Column("by", String(PERSON_LENGTH), nullable=False),
    Column("to", String(PERSON_LENGTH), nullable=False),
    # The request that made it: replayed, it is answered as the first time.
    Column("request_key", String(200)),
    Column("at", DateTime, nullable=False),
    Column("channel", String(64)),
    Column("thread_ts", String(32)),
    # What a standing approval's events add: its id, tool and argument values (``match``).
    Column("details", JSON),
    UniqueConstraint("review_id", "request_key", name="uq_review_events_request"),
    Index("ix_review_events_at", "at"),
)

# Standing approvals: a reviewer's approval of a gated tool's call that also approves every
# later call of that tool in the run whose named arguments (``match``) have the same values;
# revoked by a compare-and-set on ``revoked_at``.
standing_approvals = Table(
    "standing_approvals",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("review_id", String(32), ForeignKey("reviews.id", ondelete="CASCADE"), nullable=False),
    Column("tool", String(200), nullable=False),
    Column("match", JSON, nullable=False),
    Column("granted_by", String(PERSON_LENGTH), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("revoked_by", String(PERSON_LENGTH)),
    Column("revoked_at", DateTime),
    # Where its thread message is, once posted (revoking it edits that message).
    Column("channel", String(64)),
    Column("message_ts", String(32)),
    Index("ix_standing_approvals_run", "run_id", "tool"),
)

# Who reviews for whom while away (storage.delegations): a person's reviews go to their
# delegate until ``until`` (compared in each query, so an expired delegation ends by itself)
# or until ended early (``ended_at``). At most one unended row per person.
delegations = Table(
    "delegations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("person", String(PERSON_LENGTH), nullable=False),
    Column("delegate", String(PERSON_LENGTH), nullable=False),
    Column("until", DateTime, nullable=False),
    Column("created_by", String(PERSON_LENGTH), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("ended_by", String(PERSON_LENGTH)),
    Column("ended_at", DateTime),
    Index(
        "uq_delegations_person",
        "person",
        unique=True,
        sqlite_where=Column("ended_at").is_(None),
        postgresql_where=Column("ended_at").is_(None),
    ),
)

# Bearer tokens of the HTTP API (storage.tokens): the SHA-256 of the secret only, never the
# secret; the scopes it grants; revoked by a compare-and-set on ``revoked_at``.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("secret_hash", String(64), nullable=False),
    Column("scopes", JSON, nullable=False),
    Column("created_by", String(PERSON_LENGTH), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("revoked_by", String(PERSON_LENGTH)),
    Column("revoked_at", DateTime),
    Column("last_used_at", DateTime),
)

journal = Table(
    "journal",
    metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("pos", Integer, primary_key=True),
    Column("stream", String(200), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("payload", JSON, nullable=False),
    Column("prompt_hash", String(64)),
    Column("created_at", DateTime, nullable=False),
    UniqueConstraint("run_id", "stream", "kind", "seq", name="uq_journal_turn"),
)

# Where a suspended run stands, so a resume need not replay its journal (crew_runtime.snapshot):
# one row per run, written with the suspension that made it and dropped with any cut of the
# journal, so it is never ahead of the journal nor left describing turns that were dropped.
# ``pos`` is the journal position from which a resume must still read its turns.
snapshots = Table(
    "snapshots",
    metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("pos", Integer, nullable=False),
    Column("payload", JSON, nullable=False),
    Column("created_at", DateTime, nullable=False),
)

outbox = Table(
    "outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("review_id", String(32)),
    Column("kind", String(32), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("next_attempt_at", DateTime, nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("sent_at", DateTime),
    # The steps of the delivery already done (step name -> what Slack made of it), so a
    # retry goes on from the first step not done instead of posting everything again.
    Column("progress", JSON, nullable=False, server_default="{}"),
    # Held by one dispatcher (its claim token) until ``claimed_until``.
    Column("claim", String(32)),
    Column("claimed_until", DateTime),
    Index("ix_outbox_due", "sent_at", "next_attempt_at"),
    Index("ix_outbox_run", "run_id", "sent_at"),
    # The unsent rows in order, however many were sent before them.
    Index(
        "ix_outbox_unsent",
        "id",
        sqlite_where=Column("sent_at").is_(None),
        postgresql_where=Column("sent_at").is_(None),
    ),
)

# What a crew's webhooks are told (storage.webhooks): one row per event, committed with the
# change it announces, its ``id`` the idempotency id every delivery of it carries. The bot fans
# it out to the crew's webhooks; ``progress`` says how each went (webhook -> attempts, state),
# ``body`` is the JSON sent, fixed at the first attempt so that retries sign the same bytes.
webhook_events = Table(
    "webhook_events",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("review_id", String(32)),
    Column("crew", String(100), nullable=False),
    Column("type", String(32), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("body", Text),
    Column("progress", JSON, nullable=False, server_default="{}"),
    Column("created_at", DateTime, nullable=False),
    Column("next_attempt_at", DateTime, nullable=False),
    Column("claim", String(32)),
    Column("claimed_until", DateTime),
    # Delivered to every webhook that wants it, or given up on: nothing more to do.
    Column("done_at", DateTime),
    Index("ix_webhook_events_run", "run_id"),
    Index(
        "ix_webhook_events_open",
        "next_attempt_at",
        sqlite_where=Column("done_at").is_(None),
        postgresql_where=Column("done_at").is_(None),
    ),
)

# Slack's requests, written before they are acked and handled after (storage.inbox): a crash
# after the ack loses nothing, and ``key`` makes a retried or replayed request a no-op.
inbox = Table(
    "inbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(200), nullable=False, unique=True),
    # The body as it came (Slack's UTF-8 form or JSON: whatever a person typed is escaped).
    Column("body", Text, nullable=False),
    Column("content_type", String(100), nullable=False),
    Column("received_at", DateTime, nullable=False),
    # Whoever handles the request holds it until then; past it, anyone may take it again.
    Column("claimed_until", DateTime, nullable=False),
    Column("attempts", Integer, nullable=False, default=1),
    Column("done_at", DateTime),
    Column("error", Text),
    Index("ix_inbox_open", "done_at", "claimed_until"),
    Index("ix_inbox_received", "received_at"),
)

# CrewAI Flow persistence (crew_runtime.flows): the latest state of each flow, and the
# feedback a paused flow waits for. Plain JSON, as CrewAI's own SQLite backend stores it.
flow_states = Table(
    "flow_states",
    metadata,
    Column("flow_uuid", String(64), primary_key=True),
    Column("method_name", String(200), nullable=False),
    Column("state", JSON, nullable=False),
    Column("updated_at", DateTime, nullable=False),
)

flow_pending = Table(
    "flow_pending",
    metadata,
    Column("flow_uuid", String(64), primary_key=True),
    Column("context", JSON, nullable=False),
    Column("state", JSON, nullable=False),
    Column("created_at", DateTime, nullable=False),
)

# Who opened the app's Home tab, and the refresh each one's Home waits for (storage.home): a
# change counts into ``wanted``; a publish showing it sets ``published`` to what it saw. One row
# per person is one pending refresh at most, however many changes came (coalesced); a change
# while a publish is under way leaves ``wanted`` ahead of it, so it is shown by the next one.
home_tabs = Table(
    "home_tabs",
    metadata,
    Column("user_id", String(PERSON_LENGTH), primary_key=True),
    Column("opened_at", DateTime, nullable=False),
    Column("wanted", Integer, nullable=False),
    Column("published", Integer, nullable=False),
    Column("due_at", DateTime, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("last_error", Text),
    Column("published_at", DateTime),
    # Held by one dispatcher (its claim token) until ``claimed_until``, as outbox rows are.
    Column("claim", String(32)),
    Column("claimed_until", DateTime),
    Index("ix_home_tabs_due", "due_at"),
)

# A run's live progress (``storage.progress``): what its crew is doing, as the worker last
# wrote it (at most every few seconds), and where its one message in the run's thread is.
run_progress = Table(
    "run_progress",
    metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("state", JSON, nullable=False),
    Column("version", Integer, nullable=False),
    Column("channel", String(64)),
    Column("message_ts", String(32)),
    Column("shown_version", Integer, nullable=False),
    Column("shown_at", DateTime),
    Column("updated_at", DateTime, nullable=False),
)

# The bodies of the HTTP API's requests that carried an ``Idempotency-Key`` (storage.requests):
# the request key (the token's id and the key) and a digest of the route and the body, so that
# the key sent again with another request is refused instead of answered as the first.
api_requests = Table(
    "api_requests",
    metadata,
    Column("request_key", String(200), primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("created_at", DateTime, nullable=False),
)
