"""Validation of approval chains: a rule's ``stages`` (the crew's, a gate's or a task's), each
stage a table with its ``name``, its ``reviewers`` and its ``approvals_required``::

    stages = [
      { name = "legal",   reviewers = ["S0LEGAL"],          approvals_required = 1 },
      { name = "manager", reviewers = ["U0MAN1", "U0MAN2"], approvals_required = 1 },
    ]

Every problem is a :class:`ConfigError` naming the key, like the rest of the file's checks."""

from __future__ import annotations

import re
from typing import Any

from crew_runtime.config_values import (
    Where,
    check_keys,
    read_count,
    read_string,
    read_strings,
    show,
)
from crew_runtime.specs import USER_ID_RE, Chain
from storage import StageSpec

_STAGE_KEYS = ("name", "reviewers", "approvals_required")
_STAGE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _-]{0,39}")
_REVIEWER_ID_RE = re.compile(r"[UWS][A-Z0-9]{2,}")
_EXAMPLE = '{ name = "legal", reviewers = ["S0LEGAL"] }'


def parse_stages(table: dict[str, Any], key: str, where: Where) -> Chain:
    """The ``stages`` ``table`` (the table at ``key``) sets, in order; () where it sets none.

    Raises:
        ConfigError: not a list of stage tables; a stage with an unknown key, without a name
            or reviewers, with a name used already, with a person listed in another stage,
            or with a quorum its people cannot reach; ``approvals_required`` beside it.
    """
    if "stages" not in table:
        return ()
    stages_key = f"{key}.stages"
    value = table["stages"]
    if not isinstance(value, list):
        raise where.error(
            stages_key, f"expected a list of tables like [{_EXAMPLE}], got {show(value)}"
        )
    if not value:
        raise where.error(stages_key, f"empty; list the stages in order, like [{_EXAMPLE}]")
    if "approvals_required" in table:
        raise where.error(
            stages_key,
            "cannot be combined with approvals_required in the same table: "
            "each stage sets its own approvals_required",
        )
    chain: list[StageSpec] = []
    for i, item in enumerate(value):
        stage = _stage(item, f"{stages_key}[{i}]", where)
        for earlier in chain:
            if earlier.name == stage.name:
                raise where.error(
                    f"{stages_key}[{i}].name", f"{show(stage.name)} names an earlier stage already"
                )
            for person in set(earlier.reviewers) & set(stage.reviewers):
                raise where.error(
                    f"{stages_key}[{i}].reviewers",
                    f"{show(person)} is in the {show(earlier.name)} stage already: a person "
                    "approves at one stage of a chain",
                )
        chain.append(stage)
    return tuple(chain)


def read_reviewers(table: dict[str, Any], key: str, where: Where) -> tuple[str, ...]:
    """The ``reviewers`` ``table`` lists (a crew's, a stage's, a rule's): Slack user and
    user-group ids, each once; () where it lists none."""
    return read_strings(
        table,
        key,
        "reviewers",
        _REVIEWER_ID_RE,
        'a Slack user id ("U…", "W…") or user-group id ("S…")',
        where,
    )


def _stage(item: object, key: str, where: Where) -> StageSpec:
    if not isinstance(item, dict):
        raise where.error(key, f"expected a table like {_EXAMPLE}, got {show(item)}")
    check_keys(item, _STAGE_KEYS, key, where.error)
    if "name" not in item:
        raise where.error(f"{key}.name", 'missing; each stage needs a name, e.g. name = "legal"')
    name = read_string(item["name"], f"{key}.name", where)
    if not _STAGE_NAME_RE.fullmatch(name):
        raise where.error(
            f"{key}.name",
            f"expected a short name (letters, digits, spaces, - and _, at most 40), "
            f"got {show(name)}",
        )
    reviewers = read_reviewers(item, key, where)
    if not reviewers:
        raise where.error(
            f"{key}.reviewers", "missing or empty; each stage names who approves at it"
        )
    needed = read_count(item.get("approvals_required", 1), f"{key}.approvals_required", where)
    if all(USER_ID_RE.fullmatch(r) for r in reviewers) and needed > len(reviewers):
        raise where.error(
            f"{key}.approvals_required",
            f"{needed} approvals can never be given: the stage lists {len(reviewers)} "
            f"{'person' if len(reviewers) == 1 else 'people'}",
        )
    return StageSpec(name, reviewers, needed)
