"""``reviewers_from_input``: a crew whose runs each name their reviewer. The configuration
says which input; starting a run (the CLI here, Slack in test_slack_reviewers) takes only a
user id there; who may decide, and whose reviews ``/crew pending`` lists, follow the run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from crew_runtime.config import NOBODY, CrewSpec, load_config
from crew_runtime.reviewers import still_expected
from storage import NewReview, ReviewKind, Store
from tests.support import docs
from tests.support.cli import Cli
from tests.support.configs import error_for, write

DEAL = """\
[crews.deal]
factory = "tests.support.crews:writer"
inputs = ["customer", "approver"]
reviewers_from_input = "approver"
"""


def test_the_run_names_its_reviewer(tmp_path: Path) -> None:
    spec = load_config(write(tmp_path, DEAL)).get("deal")
    assert spec.reviewers_from_input == "approver"
    assert spec.reviewers_of({"customer": "x", "approver": "U0DANA01"}) == ("U0DANA01",)
    # A run without one (started before the crew named its input) waits for nobody.
    assert spec.reviewers_of({"customer": "x"}) == (NOBODY,)
    plain = CrewSpec(name="blog", factory="m:f", reviewers=("U0ANA001",))
    assert plain.reviewers_of({"approver": "U0DANA01"}) == ("U0ANA001",)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ('reviewers = ["U0ANA001"]\n', "cannot be combined with reviewers"),
        ("approvals_required = 2\n", "every approvals_required must be 1"),
        ("[crews.deal.gates.pay]\napprovals_required = 2\n", "every approvals_required"),
    ],
)
def test_a_reviewer_input_that_cannot_work_is_refused(
    tmp_path: Path, extra: str, says: str
) -> None:
    assert says in error_for(tmp_path, DEAL + extra)


def test_the_reviewer_input_must_be_a_required_input(tmp_path: Path) -> None:
    text = DEAL.replace('inputs = ["customer", "approver"]', 'inputs = ["customer"]')
    said = error_for(tmp_path, text + 'optional_inputs = ["approver"]\n')
    assert (
        said
        == 'crews.deal.reviewers_from_input: "approver" must be one of the crew\'s inputs = [...]'
    )


@pytest.fixture
def cli(tmp_path: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(db_url, write(tmp_path, DEAL), capsys)


def test_the_cli_takes_a_user_id_as_the_reviewer(cli: Cli) -> None:
    for given in ("approver=dana", "approver=@dana", "approver=<@U0DANA01>", "approver=u0dana01"):
        refused = cli("runs", "start", "deal", "customer=acme", given)
        assert refused.code != 0 and "give a Slack user id like approver=U012ABCDEF" in refused.err
    assert "needs the input(s) approver" in cli("runs", "start", "deal", "customer=acme").err
    assert cli.snapshot()[0] == []
    run_id = cli.ok("runs", "start", "deal", "customer=acme", "approver=U0DANA01").out.strip()
    shown = cli.ok("runs", "show", run_id, "--json").json()
    assert shown["inputs"] == {"customer": "acme", "approver": "U0DANA01"}


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = Store.open(db_url)
    yield opened
    opened.close()


def test_pending_reviews_of_runs_naming_a_person(store: Store) -> None:
    """``named``: a crew's runs count for whoever their reviewer input names, on both
    databases (the input is read out of the runs' JSON)."""
    made: dict[str, str] = {}
    for crew, approver in (("deal", "U0DANA01"), ("deal", "U0BEN001"), ("other", "U0DANA01")):
        run = store.create_run(crew, {"approver": approver, "customer": "x"}, channel="C1")
        claimed = store.claim_run("w1", timedelta(minutes=5))
        assert claimed is not None and claimed.id == run.id and claimed.lease_token
        ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="d")
        [review] = store.suspend_run(run.id, claimed.lease_token, [ask])
        made[f"{crew}:{approver}"] = review.id
    dana = store.pending_reviews({}, named={"deal": ("approver", ("U0DANA01",))})
    assert ([r.id for r in dana.reviews], dana.total) == ([made["deal:U0DANA01"]], 1)
    both = store.pending_reviews({"other": None}, named={"deal": ("approver", ("U0BEN001",))})
    assert sorted(r.id for r in both.reviews) == sorted(
        [made["deal:U0BEN001"], made["other:U0DANA01"]]
    )
    assert store.pending_reviews({}, named={"deal": ("approver", ("U0NOBODY",))}).total == 0
    # Dana, and Ben whose reviews she holds while he is away.
    held = store.pending_reviews({}, named={"deal": ("approver", ("U0DANA01", "U0BEN001"))})
    assert held.total == 2


def test_the_readme_example_is_valid_and_means_what_it_says(tmp_path: Path) -> None:
    section = docs.section("docs/guide/reviews.md", "The reviewer named at start")
    [example] = docs.blocks(section, "toml")
    spec = load_config(write(tmp_path, example)).get("deal")
    assert spec.required_inputs == ("customer", "approver")
    assert spec.reviewers_of({"customer": "acme", "approver": "U0DANA01"}) == ("U0DANA01",)


def test_the_person_still_expected_is_the_one_the_run_names(tmp_path: Path, store: Store) -> None:
    """Who a reminder by DM goes to, and who a review still waits for, is the run's reviewer,
    not the crew's (empty) list; a run that names nobody waits for nobody."""
    spec = load_config(write(tmp_path, DEAL + 'remind_by = "dm"\n')).get("deal")
    for inputs, expected in (({"approver": "U0DANA01"}, ("U0DANA01",)), ({}, ())):
        run = store.create_run("deal", {"customer": "x", **inputs}, channel="C1")
        claimed = store.claim_run("w1", timedelta(minutes=5))
        assert claimed is not None and claimed.id == run.id and claimed.lease_token
        ask = NewReview(kind=ReviewKind.TASK_REVIEW, stream="task0:Writer", seq=0, prompt="d")
        [review] = store.suspend_run(run.id, claimed.lease_token, [ask])
        assert still_expected(spec, review, store.get_run(run.id), {}) == expected
