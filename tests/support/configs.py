"""countersign.toml files written for a test, and the approval chain the tests share."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from crew_runtime import load_config
from crew_runtime.config import Config, ConfigError
from storage import Stage

CHAIN = [Stage("legal", 1), Stage("manager", 2)]


STAGES = """
[crews.deal]
factory = "tests.support.crews:writer"
forbid_self_approval = true
stages = [
  { name = "legal",   reviewers = ["U0LEA", "U0LEX"],          approvals_required = 1 },
  { name = "manager", reviewers = ["U0MAX", "U0MIA", "U0MOE"], approvals_required = 2 },
]

[crews.deal.tasks.2]               # the article: one approval, no chain
approvals_required = 1

[crews.research]                   # a question in a crew with a chain
factory = "tests.support.crews:research"
stages = [{ name = "legal", reviewers = ["U0LEA"] }, { name = "board", reviewers = ["U0BOB"] }]

[crews.payout]
factory = "tests.support.crews:payments"

[crews.payout.gates.pay]
stages = [
  { name = "finance", reviewers = ["U0FIN"] },
  { name = "cfo",     reviewers = ["U0CFO"] },
]
"""


def stages_config(tmp_path: Path) -> Config:
    path = tmp_path / "countersign.toml"
    path.write_text(STAGES)
    return load_config(path, environ={})


def error_for(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    return message.removeprefix(f"{path}: ")


def write(directory: Path, text: str, name: str = "countersign.toml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path
