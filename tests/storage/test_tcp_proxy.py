"""The proxy the fault tests cut databases off with: it forwards, cuts, and lets through again."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from tests.support.database import PG_BASE, pg_required
from tests.support.tcp_proxy import TcpProxy


def test_a_cut_drops_live_connections_and_refuses_new_ones_until_restored() -> None:
    pg_required()
    target = make_url(PG_BASE)
    with TcpProxy(target.host or "127.0.0.1", target.port or 5432) as proxy:
        engine = create_engine(proxy.url_through(PG_BASE), connect_args={"connect_timeout": 3})
        with engine.connect() as conn:
            assert conn.execute(text("select 1")).scalar_one() == 1
            proxy.cut()
            with pytest.raises(OperationalError):
                conn.execute(text("select 2"))
        with pytest.raises(OperationalError):
            engine.connect()
        proxy.restore()
        with engine.connect() as conn:
            assert conn.execute(text("select 3")).scalar_one() == 3
        assert proxy.connections >= 2
        engine.dispose()
