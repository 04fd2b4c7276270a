"""Every emoji a bot message uses has its own icon in the sandbox page (``ICONS`` in
``sandbox/page/app.js``), so the page never draws the generic face where a wrench, a
check mark or an hourglass is meant; and the page's CSS keeps what a newcomer needs on a
narrow screen and around the Home tab."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "sandbox" / "page"
WORDS = [
    ROOT / "bot" / "slack" / name
    for name in ("block_text.py", "thread_text.py", "home_text.py", "text.py")
]
_EMOJI = re.compile("[\u2190-\u2bff\U0001f000-\U0001faff]")
_SKIP = {"\u2192", "\u2194", "\u2191", "\u2193", "\u2026"}  # arrows and the ellipsis: text


def icon_keys() -> set[str]:
    script = (PAGE / "app.js").read_text()
    table = script[script.index("const ICONS = {") : script.index("const GENERIC")]
    return set(re.findall(r'^\s*"([^"]+)":', table, re.MULTILINE)) | set(
        re.findall(r', "([^"]+)": [A-Z]+', table)
    )


def test_every_emoji_of_the_bots_words_has_an_icon_of_its_own() -> None:
    used = {
        char for path in WORDS for char in _EMOJI.findall(path.read_text()) if char not in _SKIP
    }
    assert "🔧" in used  # the progress message's last tool
    missing = sorted(used - icon_keys())
    assert missing == [], f"no icon in app.js for {missing}"


def test_the_home_tab_keeps_its_side_padding_and_a_narrow_page_its_sidebar() -> None:
    css = (PAGE / "style.css").read_text()
    assert ".message-list.home-view { padding: 8px 20px; }" in css
    narrow = css[css.index("@media (max-width: 900px)") :]
    assert ".sidebar { display: none; }" not in narrow
