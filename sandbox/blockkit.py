"""Block Kit validation the way Slack's servers do it, as pure functions.

Why: the bot's Block Kit builders must be tested against the limits Slack enforces
(Slack's Block Kit reference), not against our own idea of them. Slack rejects a bad
message with ``invalid_blocks`` and a ``response_metadata.messages`` list of lines such as
``"[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]"``; the
stand-in answers the same way, using the problems found here.

Nothing here does I/O, so every rule is unit-tested without a network. Each problem
carries a JSON pointer, so a failing test says which block broke which limit.

As Slack's schema does, a block with a field its type does not have is refused (``unknown
field``), a confirmation dialog (``confirm``) must have its title (100 characters at most),
text (300), confirm and deny (30 each), and an ``initial_option`` (or ``initial_options``)
must be exactly one of the element's options.

One deliberate strictness: ``action_id`` must be unique in the whole message or view, not
only within its block (Slack's documented rule). Our bot relies on that to find a clicked
button by ``action_id``; a message that breaks it is a bug in the bot either way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MAX_BLOCK_TEXT_TOTAL",
    "Problem",
    "Surface",
    "validate_blocks",
    "validate_view",
]

Surface = Literal["message", "modal", "home"]

# Limits, from Slack's Block Kit reference (docs/architecture.md lists those that shape the bot).
MAX_BLOCKS = {"message": 50, "modal": 100, "home": 100}
MAX_TEXT_OBJECT = 3000
MAX_SECTION_FIELD = 2000
MAX_SECTION_FIELDS = 10
MAX_HEADER = 150
MAX_MARKDOWN_BLOCK = 12_000
# Undocumented cumulative cap behind ``msg_blocks_too_long`` (reports: 11.3k-13.3k).
MAX_BLOCK_TEXT_TOTAL = 12_000
MAX_ID = 255
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
MAX_URL = 3000
MAX_PLACEHOLDER = 150
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150
MAX_OPTIONS = 100
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_LABEL = 2000
MAX_INPUT_LENGTH = 3000
MAX_VIEW_TITLE = 24
MAX_PRIVATE_METADATA = 3000
MAX_VIEW_BYTES = 250_000
# The confirmation dialog object: all four texts required.
MAX_CONFIRM = {"title": 100, "text": 300, "confirm": 30, "deny": 30}

TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})
MESSAGE_BLOCKS = frozenset(
    {
        "section",
        "divider",
        "image",
        "actions",
        "context",
        "header",
        "rich_text",
        "markdown",
        "file",
        "video",
    }
)
VIEW_BLOCKS = frozenset(
    {"section", "divider", "image", "actions", "context", "header", "input", "rich_text", "video"}
)
SELECTS = frozenset(
    {
        "static_select",
        "external_select",
        "users_select",
        "conversations_select",
        "channels_select",
        "multi_static_select",
        "multi_external_select",
        "multi_users_select",
        "multi_conversations_select",
        "multi_channels_select",
    }
)
INTERACTIVE = SELECTS | {
    "button",
    "overflow",
    "datepicker",
    "timepicker",
    "datetimepicker",
    "checkboxes",
    "radio_buttons",
    "plain_text_input",
    "number_input",
    "email_text_input",
    "url_text_input",
    "rich_text_input",
    "file_input",
}
ACTIONS_ELEMENTS = INTERACTIVE - {
    "plain_text_input",
    "number_input",
    "email_text_input",
    "url_text_input",
    "rich_text_input",
    "file_input",
}
ACCESSORY_ELEMENTS = (ACTIONS_ELEMENTS - {"datetimepicker"}) | {"image"}
INPUT_ELEMENTS = INTERACTIVE - {"button", "overflow"}
# Elements that may ask for a confirmation dialog (``confirm``).
CONFIRMABLE = SELECTS | {
    "button",
    "overflow",
    "datepicker",
    "timepicker",
    "datetimepicker",
    "checkboxes",
    "radio_buttons",
}
# The fields of each block (Slack's Block Kit reference; slack_sdk's models agree): any
# other is refused, as Slack's schema refuses it.
BLOCK_FIELDS: dict[str, frozenset[str]] = {
    kind: frozenset({"type", "block_id", *fields})
    for kind, fields in {
        "section": ("text", "fields", "accessory", "expand"),
        "divider": (),
        "image": ("alt_text", "image_url", "slack_file", "title"),
        "actions": ("elements",),
        "context": ("elements",),
        "header": ("text",),
        "rich_text": ("elements",),
        "markdown": ("text",),
        "file": ("external_id", "source"),
        "video": (
            "alt_text",
            "author_name",
            "description",
            "provider_icon_url",
            "provider_name",
            "thumbnail_url",
            "title",
            "title_url",
            "video_url",
        ),
        "input": ("label", "element", "dispatch_action", "hint", "optional"),
    }.items()
}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Problem:
    """One rule a payload breaks.

    ``code`` is the Slack error code the whole request fails with (``invalid_blocks``,
    ``invalid_blocks_format``, ``msg_blocks_too_long``, ``invalid_arguments``,
    ``view_too_large``); ``pointer`` is a JSON pointer into the request.
    """

    code: str
    pointer: str
    message: str

    def slack_line(self) -> str:
        """The line Slack puts in ``response_metadata.messages``."""
        return f"[ERROR] {self.message} [json-pointer:{self.pointer}]"


class _Checker:
    """Walks one message's or view's blocks and collects problems."""

    def __init__(self, surface: Surface, code: str) -> None:
        self.surface = surface
        self.code = code
        self.problems: list[Problem] = []
        self.block_ids: set[str] = set()
        self.action_ids: set[str] = set()
        self.text_total = 0

    def add(self, pointer: str, message: str, code: str | None = None) -> None:
        self.problems.append(Problem(code or self.code, pointer, message))

    # -- composition objects -------------------------------------------------------------

    def text(
        self, obj: Any, at: str, *, limit: int = MAX_TEXT_OBJECT, plain_only: bool = False
    ) -> None:
        if not isinstance(obj, Mapping):
            self.add(at, "must provide an object")
            return
        kind = obj.get("type")
        if kind not in TEXT_TYPES:
            self.add(f"{at}/type", "must be one of plain_text, mrkdwn")
            return
        if plain_only and kind != "plain_text":
            self.add(f"{at}/type", "must be plain_text")
        if kind == "mrkdwn" and "emoji" in obj:
            self.add(f"{at}/emoji", "is not allowed for mrkdwn")
        if kind == "plain_text" and "verbatim" in obj:
            self.add(f"{at}/verbatim", "is not allowed for plain_text")
        self.string(obj.get("text"), f"{at}/text", limit)
        if isinstance(obj.get("text"), str):
            self.text_total += len(obj["text"])

    def string(self, value: Any, at: str, limit: int, *, minimum: int = 1) -> None:
        if not isinstance(value, str):
            self.add(at, "must be a string")
        elif len(value) < minimum:
            self.add(at, f"must be more than {minimum - 1} characters")
        elif len(value) > limit:
            self.add(at, f"must be less than {limit + 1} characters")

    def identifier(self, value: Any, at: str, seen: set[str], what: str) -> None:
        self.string(value, at, MAX_ID)
        if isinstance(value, str):
            if value in seen:
                self.add(at, f"{what} '{value}' already exists")
            seen.add(value)

    def options(self, options: Any, at: str, *, limit: int, mrkdwn: bool = False) -> None:
        if not isinstance(options, list) or not options:
            self.add(at, "must provide a non-empty array")
            return
        if len(options) > limit:
            self.add(at, f"must provide no more than {limit} items")
        for i, option in enumerate(options):
            here = f"{at}/{i}"
            if not isinstance(option, Mapping):
                self.add(here, "must provide an object")
                continue
            self.text(
                option.get("text"), f"{here}/text", limit=MAX_OPTION_TEXT, plain_only=not mrkdwn
            )
            self.string(option.get("value"), f"{here}/value", MAX_OPTION_VALUE)

    def confirm(self, obj: Any, at: str) -> None:
        """A confirmation dialog: title, text, confirm and deny, each within its limit."""
        if not isinstance(obj, Mapping):
            self.add(at, "must provide an object")
            return
        for key, limit in MAX_CONFIRM.items():
            if key not in obj:
                self.add(at, f"missing required field: {key}")
            else:
                self.text(obj[key], f"{at}/{key}", limit=limit, plain_only=key != "text")
        if obj.get("style") not in (None, "primary", "danger"):
            self.add(f"{at}/style", "must be one of primary, danger")
        for key in sorted(set(obj) - {*MAX_CONFIRM, "style"}):
            self.add(f"{at}/{key}", f"unknown field: {key}")

    def initial_options(self, el: Mapping[str, Any], at: str) -> None:
        """``initial_option`` (or each of ``initial_options``) must be one of the options,
        exactly: the same text and value."""
        offered: list[Any] = []
        if isinstance(el.get("options"), list):
            offered = list(el["options"])
        for group in el.get("option_groups") or []:
            if isinstance(group, Mapping) and isinstance(group.get("options"), list):
                offered += group["options"]
        chosen: list[tuple[str, Any]] = []
        if "initial_option" in el:
            chosen.append(("initial_option", el["initial_option"]))
        if isinstance(el.get("initial_options"), list):
            chosen += [(f"initial_options/{i}", o) for i, o in enumerate(el["initial_options"])]
        for where, option in chosen:
            if option not in offered:
                self.add(f"{at}/{where}", "must match one of the options")

    # -- elements --------------------------------------------------------------------------

    def element(self, el: Any, at: str, allowed: frozenset[str]) -> None:
        if not isinstance(el, Mapping):
            self.add(at, "must provide an object")
            return
        kind = el.get("type")
        if kind not in allowed:
            self.add(f"{at}/type", f"element type '{kind}' is not allowed here")
            return
        if kind == "image":
            self.string(el.get("alt_text"), f"{at}/alt_text", MAX_LABEL)
            if "image_url" not in el and "slack_file" not in el:
                self.add(at, "must provide image_url or slack_file")
            return
        if "action_id" in el:
            self.identifier(el["action_id"], f"{at}/action_id", self.action_ids, "action_id")
        if "placeholder" in el:
            self.text(
                el["placeholder"], f"{at}/placeholder", limit=MAX_PLACEHOLDER, plain_only=True
            )
        if "confirm" in el:
            if kind in CONFIRMABLE:
                self.confirm(el["confirm"], f"{at}/confirm")
            else:
                self.add(f"{at}/confirm", f"is not allowed for {kind}")
        if kind in ("static_select", "multi_static_select", "checkboxes", "radio_buttons"):
            self.initial_options(el, at)
        if kind == "button":
            self.text(el.get("text"), f"{at}/text", limit=MAX_BUTTON_TEXT, plain_only=True)
            if "value" in el:
                self.string(el["value"], f"{at}/value", MAX_BUTTON_VALUE)
            if "url" in el:
                self.string(el["url"], f"{at}/url", MAX_URL)
            if el.get("style") not in (None, "primary", "danger"):
                self.add(f"{at}/style", "must be one of primary, danger")
        elif kind in ("static_select", "multi_static_select"):
            if "option_groups" in el:
                for g, group in enumerate(el["option_groups"] or []):
                    self.options(
                        group.get("options"), f"{at}/option_groups/{g}/options", limit=MAX_OPTIONS
                    )
            else:
                self.options(el.get("options"), f"{at}/options", limit=MAX_OPTIONS)
        elif kind == "overflow":
            self.options(el.get("options"), f"{at}/options", limit=5)
            if isinstance(el.get("options"), list) and len(el["options"]) < 2:
                self.add(f"{at}/options", "must provide at least 2 items")
        elif kind in ("checkboxes", "radio_buttons"):
            self.options(el.get("options"), f"{at}/options", limit=10, mrkdwn=True)
        elif kind == "plain_text_input":
            self._text_input(el, at)
        elif kind == "datepicker" and not _DATE.match(str(el.get("initial_date", "2000-01-01"))):
            self.add(f"{at}/initial_date", "must match YYYY-MM-DD")

    def _text_input(self, el: Mapping[str, Any], at: str) -> None:
        max_length = el.get("max_length", MAX_INPUT_LENGTH)
        min_length = el.get("min_length", 0)
        if not isinstance(max_length, int) or not 1 <= max_length <= MAX_INPUT_LENGTH:
            self.add(f"{at}/max_length", f"must be between 1 and {MAX_INPUT_LENGTH}")
            max_length = MAX_INPUT_LENGTH
        if not isinstance(min_length, int) or not 0 <= min_length <= MAX_INPUT_LENGTH:
            self.add(f"{at}/min_length", f"must be between 0 and {MAX_INPUT_LENGTH}")
        if "initial_value" in el:
            self.string(el["initial_value"], f"{at}/initial_value", max_length, minimum=0)

    # -- blocks ----------------------------------------------------------------------------

    def blocks(self, blocks: Any, at: str) -> None:
        if not isinstance(blocks, list):
            self.add(at, "must provide an array", code="invalid_blocks_format")
            return
        limit = MAX_BLOCKS[self.surface]
        if len(blocks) > limit:
            self.add(at, f"must provide no more than {limit} items")
        allowed = MESSAGE_BLOCKS if self.surface == "message" else VIEW_BLOCKS
        for i, block in enumerate(blocks):
            self.block(block, f"{at}/{i}", allowed)
        if self.surface == "message" and self.text_total > MAX_BLOCK_TEXT_TOTAL:
            self.add(
                at,
                f"total text of blocks exceeds {MAX_BLOCK_TEXT_TOTAL} characters",
                code="msg_blocks_too_long",
            )

    def block(self, block: Any, at: str, allowed: frozenset[str]) -> None:
        if not isinstance(block, Mapping):
            self.add(at, "must provide an object", code="invalid_blocks_format")
            return
        kind = block.get("type")
        if kind not in allowed:
            self.add(f"{at}/type", f"block type '{kind}' is not allowed on a {self.surface}")
            return
        if "block_id" in block:
            self.identifier(block["block_id"], f"{at}/block_id", self.block_ids, "block_id")
        for key in sorted(set(block) - BLOCK_FIELDS.get(str(kind), frozenset(block))):
            self.add(f"{at}/{key}", f"unknown field: {key}")
        if kind == "section":
            self._section(block, at)
        elif kind == "header":
            self.text(block.get("text"), f"{at}/text", limit=MAX_HEADER, plain_only=True)
        elif kind == "context":
            self._elements(block.get("elements"), at, MAX_CONTEXT_ELEMENTS, None)
        elif kind == "actions":
            self._elements(block.get("elements"), at, MAX_ACTIONS_ELEMENTS, ACTIONS_ELEMENTS)
        elif kind == "image":
            self.string(block.get("alt_text"), f"{at}/alt_text", MAX_LABEL)
            if "image_url" not in block and "slack_file" not in block:
                self.add(at, "must provide image_url or slack_file")
            if "title" in block:
                self.text(block["title"], f"{at}/title", limit=MAX_LABEL, plain_only=True)
        elif kind == "markdown":
            self.string(block.get("text"), f"{at}/text", MAX_MARKDOWN_BLOCK)
            if isinstance(block.get("text"), str):
                self.text_total += len(block["text"])
        elif kind == "input":
            self.text(block.get("label"), f"{at}/label", limit=MAX_LABEL, plain_only=True)
            if "hint" in block:
                self.text(block["hint"], f"{at}/hint", limit=MAX_LABEL, plain_only=True)
            self.element(block.get("element"), f"{at}/element", INPUT_ELEMENTS)
        elif kind == "rich_text" and not isinstance(block.get("elements"), list):
            self.add(f"{at}/elements", "must provide an array")

    def _section(self, block: Mapping[str, Any], at: str) -> None:
        if "text" not in block and "fields" not in block:
            self.add(at, "must provide text or fields")
        if "text" in block:
            self.text(block["text"], f"{at}/text")
        if "fields" in block:
            fields = block["fields"]
            if not isinstance(fields, list) or not fields:
                self.add(f"{at}/fields", "must provide a non-empty array")
            else:
                if len(fields) > MAX_SECTION_FIELDS:
                    self.add(
                        f"{at}/fields", f"must provide no more than {MAX_SECTION_FIELDS} items"
                    )
                for i, field in enumerate(fields):
                    self.text(field, f"{at}/fields/{i}", limit=MAX_SECTION_FIELD)
        if "accessory" in block:
            self.element(block["accessory"], f"{at}/accessory", ACCESSORY_ELEMENTS)

    def _elements(self, elements: Any, at: str, limit: int, allowed: frozenset[str] | None) -> None:
        at = f"{at}/elements"
        if not isinstance(elements, list) or not elements:
            self.add(at, "must provide a non-empty array")
            return
        if len(elements) > limit:
            self.add(at, f"must provide no more than {limit} items")
        for i, el in enumerate(elements):
            if allowed is not None:
                self.element(el, f"{at}/{i}", allowed)
            elif isinstance(el, Mapping) and el.get("type") == "image":
                self.element(el, f"{at}/{i}", frozenset({"image"}))
            else:
                self.text(el, f"{at}/{i}")


def validate_blocks(blocks: Any, *, surface: Surface = "message") -> list[Problem]:
    """Check the ``blocks`` of a message (or of a view, with ``surface``).

    Args:
        blocks: the decoded ``blocks`` argument as the bot sent it.
        surface: ``message`` allows 50 blocks and no ``input``; ``modal``/``home`` 100.

    Returns:
        The problems found; empty when Slack would accept the blocks.

    Example:
        >>> header = {"type": "header", "text": {"type": "mrkdwn", "text": "x"}}
        >>> validate_blocks([header])[0].pointer
        '/blocks/0/text/type'
    """
    checker = _Checker(surface, "invalid_blocks")
    checker.blocks(blocks, "/blocks")
    return checker.problems


def validate_view(view: Any) -> list[Problem]:
    """Check a view for ``views.open``/``update``/``push``; Slack answers ``invalid_arguments``."""
    if not isinstance(view, Mapping):
        return [Problem("invalid_arguments", "/view", "must provide an object")]
    if len(json.dumps(view)) > MAX_VIEW_BYTES:
        return [Problem("view_too_large", "/view", f"must be under {MAX_VIEW_BYTES} bytes")]
    kind = view.get("type")
    surface: Surface = "home" if kind == "home" else "modal"
    checker = _Checker(surface, "invalid_arguments")
    if kind not in ("modal", "home"):
        checker.add("/view/type", "must be one of modal, home")
    if kind == "modal":
        checker.text(view.get("title"), "/view/title", limit=MAX_VIEW_TITLE, plain_only=True)
        for key in ("submit", "close"):
            if key in view:
                checker.text(view[key], f"/view/{key}", limit=MAX_VIEW_TITLE, plain_only=True)
        blocks = view.get("blocks")
        has_input = isinstance(blocks, Sequence) and any(
            isinstance(b, Mapping) and b.get("type") == "input" for b in blocks
        )
        if has_input and "submit" not in view:
            checker.add("/view/submit", "must provide submit when the view has input blocks")
    for key, limit in (
        ("private_metadata", MAX_PRIVATE_METADATA),
        ("callback_id", MAX_ID),
        ("external_id", MAX_ID),
    ):
        if key in view:
            checker.string(view[key], f"/view/{key}", limit, minimum=0)
    checker.blocks(view.get("blocks"), "/view/blocks")
    return [
        Problem("invalid_arguments", p.pointer, p.message) if p.code != "invalid_arguments" else p
        for p in checker.problems
    ]
