"""Whether a test failed, asked by a fixture's teardown (to keep a screenshot, say); the
reports are stashed by the hook in tests/conftest.py."""

from __future__ import annotations

import pytest

REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def failed(request: pytest.FixtureRequest) -> bool:
    """Whether the test using the fixture behind ``request`` failed (in its call phase)."""
    report = request.node.stash.get(REPORTS, {}).get("call")
    return report is not None and report.failed
