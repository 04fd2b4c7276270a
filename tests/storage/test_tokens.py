"""The HTTP API's tokens: made with their hash only, checked in constant time, revoked once
(racing revocations too), on SQLite and PostgreSQL; and ``countersign tokens``."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.tokens import Scope, TokenRefused, Tokens, parse_scopes
from storage import ApiToken, Store, TokenExists, TokenNotFound, TokenRevoked
from storage.schema import api_tokens
from tests.support.cli import Cli, assert_refused
from tests.support.timing import FakeClock, at_once


def test_a_token_is_kept_as_its_hash_and_opens_until_revoked(db_url: str) -> None:
    clock = FakeClock()
    timed = Store.open(db_url, clock=clock)
    tokens = Tokens(timed)
    made, secret = tokens.create("ci", [Scope.READ, Scope.START], by="ops")
    assert secret.startswith("cs_") and made.scopes == ("start", "read")
    with timed.engine.connect() as conn:
        row = conn.execute(select(api_tokens)).one()
    assert secret not in str(tuple(row))
    assert row.secret_hash == hashlib.sha256(secret.encode()).hexdigest()

    used = tokens.authenticate(secret)
    assert used is not None and used.name == "ci"
    assert timed.tokens()[0].last_used_at == clock.now
    first_use = clock.now
    clock.advance(seconds=30)  # noted once a minute, not on every request
    tokens.authenticate(secret)
    assert timed.tokens()[0].last_used_at == first_use
    clock.advance(seconds=31)
    tokens.authenticate(secret)
    assert timed.tokens()[0].last_used_at == clock.now

    other = tokens.create("other", [Scope.READ], by="ops")[1]
    forged = secret[: secret.rindex("_") + 1] + other[other.rindex("_") + 1 :]
    for wrong in (forged, secret + "x", secret.upper(), "", "cs_", other[:-1]):
        assert tokens.authenticate(wrong) is None, wrong

    revoked = timed.revoke_token("ci", by="ops")
    assert (revoked.revoked_by, revoked.revoked_at) == ("ops", clock.now)
    assert tokens.authenticate(secret) is None
    assert tokens.authenticate(other) is not None
    timed.close()


def test_names_are_unique_and_checked(store: Store) -> None:
    tokens = Tokens(store)
    tokens.create("ci", [Scope.READ], by="ops")
    with pytest.raises(TokenExists, match="'ci' exists already"):
        tokens.create("ci", [Scope.DECIDE], by="ops")
    store.revoke_token("ci", by="ops")
    with pytest.raises(TokenExists):  # a revoked name stays taken
        tokens.create("ci", [Scope.READ], by="ops")
    for bad in ("", "-x", "a b", "x" * 61, "ü"):
        with pytest.raises(TokenRefused, match="token name"):
            tokens.create(bad, [Scope.READ], by="ops")
    assert [t.name for t in store.tokens()] == ["ci"]


def test_scopes_are_parsed_once_each_in_order() -> None:
    assert parse_scopes("decide, read,read") == (Scope.READ, Scope.DECIDE)
    with pytest.raises(TokenRefused, match=r"unknown scope.*'write': use start,read,decide"):
        parse_scopes("read,write")
    with pytest.raises(TokenRefused, match="at least one scope"):
        parse_scopes(" , ")


def _revoke_at_once(store: Store, name: str) -> list[ApiToken | TokenRevoked]:
    """Two people revoke the token ``name`` at the same moment; what each got."""
    barrier = threading.Barrier(2)
    results: list[ApiToken | TokenRevoked] = []

    def revoke(n: int) -> None:
        barrier.wait()
        try:
            results.append(store.revoke_token(name, by=f"person{n}"))
        except TokenRevoked as exc:
            results.append(exc)

    at_once(revoke, 2)
    return results


def test_two_revocations_at_once_revoke_once(store: Store) -> None:
    for n in range(3):
        Tokens(store).create(f"t{n}", [Scope.READ], by="ops")
        results = _revoke_at_once(store, f"t{n}")
        lost = [r for r in results if isinstance(r, TokenRevoked)]
        won = [r for r in results if isinstance(r, ApiToken)]
        assert len(lost) == len(won) == 1
        assert lost[0].by == won[0].revoked_by
    with pytest.raises(TokenNotFound):
        store.revoke_token("nobody", by="ops")


@pytest.fixture
def cli(tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    config = tmp_path / "countersign.toml"
    config.write_text("")
    return Cli(db_url, config, capsys)


def test_the_cli_prints_a_token_once_and_revokes_it_once(cli: Cli) -> None:
    made = cli.ok("tokens", "create", "ci-bot", "--scopes", "read,decide", "--by", "ops")
    secret = made.out.strip()
    assert secret.startswith("cs_") and "shown only now" in made.err
    listed = cli.ok("tokens", "list")
    assert "ci-bot" in listed.out and "read,decide" in listed.out and secret not in listed.out
    as_json = cli.ok("tokens", "list", "--json")
    assert secret not in as_json.out and '"revoked_at": null' in as_json.out
    assert_refused(cli("tokens", "create", "ci-bot", "--scopes", "read"), "exists already")
    assert_refused(cli("tokens", "create", "x", "--scopes", "write"), "unknown scope")
    revoked = cli.ok("tokens", "revoke", "ci-bot", "--by", "ops")
    assert "ci-bot revoked by ops" in revoked.out
    assert_refused(cli("tokens", "revoke", "ci-bot"), "revoked already, by ops")
    assert_refused(cli("tokens", "revoke", "nope"), "no API token named 'nope'")
    assert "by ops" in cli.ok("tokens", "list").out
