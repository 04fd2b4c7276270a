"""A reviewer's edit of a typed task's output, checked against the model's JSON schema
before anything is recorded (the CLI, the service and the Slack modal share this check)."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, Field

from crew_runtime.outputs import WHOLE, output_errors, parse_edited_output


class Section(BaseModel):
    title: str
    words: int = Field(default=100, ge=0)


class Outline(BaseModel):
    headline: str
    sections: list[Section]
    draft: bool = False


SCHEMA = Outline.model_json_schema()


def test_an_edit_that_fits_is_returned_as_json() -> None:
    text = '{"headline": "Otters", "sections": [{"title": "Play", "words": 50}]}'
    assert parse_edited_output(text, SCHEMA) == {
        "headline": "Otters",
        "sections": [{"title": "Play", "words": 50}],
    }


def test_each_field_says_what_is_wrong_with_it_nested_ones_too() -> None:
    errors = output_errors(
        SCHEMA,
        {"headlin": "Otters", "sections": [{"title": "Play"}, {"words": -1, "x": 1}], "draft": 1},
    )
    assert errors == {
        "draft": "1 is not of type 'boolean'",
        "headline": "required",
        "headlin": "unknown field (expected one of: headline, sections, draft)",
        "sections[1].title": "required",
        "sections[1].words": "-1 is less than the minimum of 0",
        "sections[1].x": "unknown field (expected one of: title, words)",
    }


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Otters are great.", "the output must be JSON: Expecting value (line 1, column 1)"),
        ("[1, 2]", f"{WHOLE}: [1, 2] is not of type 'object'"),
        ('{"headline": "Otters"}', "sections: required"),
        (
            '{"headline": "Otters", "sections": [{"title": "Play", "words": NaN}]}',
            "the output must be JSON: NaN is not a JSON number (JSON has no NaN or Infinity)",
        ),
    ],
)
def test_text_that_is_not_the_model_is_refused_in_words(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        parse_edited_output(text, SCHEMA)


def test_a_long_problem_is_cut() -> None:
    (problem,) = output_errors(SCHEMA, {"headline": "x" * 500, "sections": "y" * 500}).values()
    assert len(problem) == 150
