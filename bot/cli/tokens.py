"""``countersign tokens``: the HTTP API's bearer tokens (``bot.tokens``).

``create`` prints the token once, on stdout alone (so ``$(countersign tokens create …)``
captures it), and what to do with it on stderr; nothing prints it again, since only its hash
is kept. ``list`` never shows a secret; ``revoke`` is a compare-and-set.
"""

from __future__ import annotations

import json
import sys

from bot.cli.context import Context
from bot.cli.render import iso, table
from bot.tokens import Tokens, parse_scopes
from storage import ApiToken


def tokens_create(ctx: Context) -> int:
    args = ctx.args
    scopes = parse_scopes(args.scopes)
    by = (args.by or "").strip() or ctx.settings.default_user
    made, secret = Tokens(ctx.store()).create(args.name, scopes, by=by)
    print(secret)
    print(
        f"token {made.name} ({','.join(made.scopes)}) made: it is shown only now, so keep it; "
        "send it as 'Authorization: Bearer <token>'",
        file=sys.stderr,
    )
    return 0


def tokens_list(ctx: Context) -> int:
    tokens = ctx.store().tokens()
    if ctx.args.json:
        print(json.dumps([token_json(t) for t in tokens], indent=2, ensure_ascii=False))
    elif not tokens:
        print("no tokens")
    else:
        print(
            table(
                ["NAME", "SCOPES", "CREATED", "BY", "LAST USED", "REVOKED"],
                (
                    [
                        t.name,
                        ",".join(t.scopes),
                        iso(t.created_at) or "",
                        t.created_by,
                        iso(t.last_used_at) or "-",
                        f"{iso(t.revoked_at)} by {t.revoked_by}" if t.revoked_at else "-",
                    ]
                    for t in tokens
                ),
            )
        )
    return 0


def tokens_revoke(ctx: Context) -> int:
    by = (ctx.args.by or "").strip() or ctx.settings.default_user
    token = ctx.store().revoke_token(ctx.args.name, by=by)
    print(f"token {token.name} revoked by {by}: requests with it are refused from now on")
    return 0


def token_json(token: ApiToken) -> dict[str, object]:
    """A token as ``tokens list --json`` shows it: everything but its hash."""
    return {
        "name": token.name,
        "scopes": list(token.scopes),
        "created_by": token.created_by,
        "created_at": iso(token.created_at),
        "last_used_at": iso(token.last_used_at),
        "revoked_by": token.revoked_by,
        "revoked_at": iso(token.revoked_at),
    }
