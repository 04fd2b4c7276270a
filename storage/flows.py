"""Storage for CrewAI Flows: state snapshots and pending feedback, as plain JSON."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, select, update

from storage.engine import write_transaction
from storage.schema import flow_pending, flow_states
from storage.store import Store

JSON = dict[str, Any]


class FlowStore:
    """Upserts by flow id; each call is one transaction on the Store's engine."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def save_state(self, flow_uuid: str, method_name: str, state: JSON) -> None:
        with write_transaction(self.store.engine) as conn:
            values = {"method_name": method_name, "state": state, "updated_at": self.store.clock()}
            changed = conn.execute(
                update(flow_states).where(flow_states.c.flow_uuid == flow_uuid).values(**values)
            ).rowcount
            if changed == 0:
                conn.execute(insert(flow_states).values(flow_uuid=flow_uuid, **values))

    def load_state(self, flow_uuid: str) -> JSON | None:
        with self.store.engine.connect() as conn:
            state: JSON | None = conn.execute(
                select(flow_states.c.state).where(flow_states.c.flow_uuid == flow_uuid)
            ).scalar_one_or_none()
            return state

    def load_pending(self, flow_uuid: str) -> tuple[JSON, JSON] | None:
        """``(state, context)`` of a paused flow, or None."""
        with self.store.engine.connect() as conn:
            row = conn.execute(
                select(flow_pending.c.state, flow_pending.c.context).where(
                    flow_pending.c.flow_uuid == flow_uuid
                )
            ).first()
            return None if row is None else (row.state, row.context)

    def clear_pending(self, flow_uuid: str) -> None:
        with write_transaction(self.store.engine) as conn:
            conn.execute(delete(flow_pending).where(flow_pending.c.flow_uuid == flow_uuid))
