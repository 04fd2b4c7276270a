"""One exception root: every failure Countersign expects is a ``CountersignError``, in the tree
drawn in ``storage.errors``, so ``except CountersignError`` catches them all."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from datetime import timedelta
from pathlib import Path

import pytest

import storage.errors
from bot.cli.main import main
from crew_runtime.config import ConfigError, load_config
from storage import (
    AlreadyDecided,
    CountersignError,
    DecisionKind,
    NewDecision,
    NewReview,
    ReviewKind,
    Store,
)

# Outside the tree on purpose (storage.errors says why).
OUTSIDE = {"RunSignal", "PauseRun", "RunRejected", "RunAborted", "IllegalTransition"}


def _our_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in ("bot", "crew_runtime", "storage"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if info.name.startswith("sandbox") or info.name.endswith("__main__"):
                continue  # the stand-in's errors are Slack's
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                ):
                    found[name] = value
    return found


def test_every_error_of_ours_is_a_countersign_error_drawn_in_the_tree() -> None:
    found = _our_exceptions()
    assert {"StorageError", "ConfigError", "CliError", "AlreadyDecided"} <= found.keys()
    strays = sorted(n for n, c in found.items() if not issubclass(c, CountersignError))
    assert strays == sorted(OUTSIDE)
    tree = storage.errors.__doc__ or ""
    undrawn = sorted(n for n in found.keys() - OUTSIDE if n not in tree)
    assert undrawn == []


def test_except_countersign_error_catches_a_decision_that_came_second(store: Store) -> None:
    run = store.create_run("writer", {})
    claimed = store.claim_run("w1", timedelta(seconds=30))
    assert claimed is not None and claimed.lease_token is not None
    (review,) = store.suspend_run(
        run.id, claimed.lease_token, [NewReview(ReviewKind.TASK_REVIEW, "task0:W", 0, "draft")]
    )
    store.decide(review.id, NewDecision(DecisionKind.APPROVE, "U1"))
    with pytest.raises(CountersignError) as second:
        store.decide(review.id, NewDecision(DecisionKind.REJECT, "U2"))
    assert isinstance(second.value, AlreadyDecided)


def test_a_configuration_error_is_a_countersign_error_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "countersign.toml"
    bad.write_text("[crews.writer]\nfactory = 'nowhere'\n")
    assert issubclass(ConfigError, CountersignError)
    code = main(
        ["--config", str(bad), "--database-url", f"sqlite:///{tmp_path}/c.db", "crews", "list"]
    )
    assert code == 2
    assert capsys.readouterr().err.startswith("error: ")
    with pytest.raises(CountersignError, match="nowhere"):
        load_config(bad).get("writer")
