"""The HTTP API and its OpenAPI document cannot drift: schemathesis generates requests from
the document (valid ones and ones that break it) and checks every answer against it, a
bounded run (a few hundred cases, a fixed seed) against the real server on 127.0.0.1.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import seed as fixed_seed
from schemathesis.checks import positive_data_acceptance

from bot.hosting.openapi import document
from tests.support.api_harness import ApiBench, bench

__all__ = ["bench"]  # the fixture, used by name

# About a minute on 2 CPUs: with the suite's processes, not in `make check`. On PostgreSQL,
# which refuses more (a NUL, say) than SQLite does.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.parametrize("db_url", ["postgres"], indirect=True),
]
EXAMPLES = 60
"""Cases per operation: five operations, 300 cases."""

schema = schemathesis.openapi.from_dict(document())


@schema.parametrize()
@fixed_seed(21)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    database=None,
)
def test_every_answer_is_one_the_document_describes(
    case: schemathesis.Case, bench: ApiBench
) -> None:
    assert bench.api.base.startswith("http://127.0.0.1:")
    case.call_and_validate(
        base_url=f"{bench.api.base}/api/v1",
        headers={"Authorization": f"Bearer {bench.tokens['all']}"},
        # A request the document allows may still name a crew this deployment does not
        # have, or a kind that needs text without it: a 400 the document lists, not a drift.
        excluded_checks=[positive_data_acceptance],
    )
