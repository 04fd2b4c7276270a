"""What a webhook receives: the event as JSON, its ``data`` shaped like the CLI's ``--json``
objects (``bot.documents``), and the signature that proves it came from us.

``{"id": "evt_…", "type": "run.waiting", "created_at": "2026-…Z", "data": {…}}``:

- ``run.waiting``: ``data.run``, the run with the reviews it waits for;
- ``run.finished``: ``data.run``, the run (its final status, output or error) with its reviews;
- ``review.decided``: ``data.review`` (its ``decision``: kind, by, text), ``data.run`` (without
  its reviews) and ``data.approved_by``, every approver of a review that needed several.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from bot.documents import iso, review_json, run_json
from bot.slack.handlers import sync
from storage import APPROVED_BY, Store, WebhookEvent, WebhookEventType

SIGNATURE_HEADER = "Countersign-Signature"
DELIVERY_HEADER = "Countersign-Delivery"
EVENT_HEADER = "Countersign-Event"


def signature(secret: bytes, timestamp: int, body: str) -> str:
    """``t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" under secret>``."""
    signed = f"{timestamp}.{body}".encode()
    return f"t={timestamp},v1={hmac.new(secret, signed, hashlib.sha256).hexdigest()}"


async def body_of(store: Store, event: WebhookEvent) -> str:
    """The JSON the event's deliveries send, read from the run and reviews as they are now
    (the caller keeps it, so every retry sends the same bytes)."""
    run = await sync(store.get_run, event.run_id)
    data: dict[str, Any]
    if event.type is WebhookEventType.REVIEW_DECIDED and event.review_id is not None:
        review = await sync(store.get_review, event.review_id)
        approvers = (review.decision.details if review.decision else {}).get(APPROVED_BY)
        data = {
            "review": review_json(review),
            "run": run_json(run, ()),
            "approved_by": list(approvers) if isinstance(approvers, list) else [],
        }
    elif event.type is WebhookEventType.RUN_WAITING:
        waiting = [await sync(store.get_review, str(i)) for i in event.payload.get("reviews", [])]
        data = {"run": run_json(run, waiting)}
    else:
        data = {"run": run_json(run, await sync(store.list_reviews, status=None, run_id=run.id))}
    return json.dumps(
        {
            "id": event.id,
            "type": event.type.value,
            "created_at": iso(event.created_at),
            "data": data,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
