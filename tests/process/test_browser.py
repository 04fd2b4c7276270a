"""The sandbox page in a real browser: Debian's Chromium, headless, driven by Playwright.

A person's whole review of the writer crew, through the page only: type the slash command in
the composer, open the run's thread, *Request changes* through the modal, *Approve* the
revised outline and the article, and read the result in the thread. The demo runs as a
reader starts it (`countersign demo`, its own process group); the browser only clicks and
types. ``make test`` installs the ``chromium`` package when it is missing.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.demo_process import DemoProcess
from tests.support.reports import failed

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless=new",
    "--no-sandbox",  # root in a container: Chromium's sandbox needs user namespaces
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--metrics-recording-only",
]
FEEDBACK = "Add a section on otter tools"
TIMEOUT_MS = 90_000


def _chromium() -> str:
    if shutil.which(CHROMIUM) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium package")
        pytest.skip(f"{CHROMIUM} is missing (make test installs it)")
    return CHROMIUM


@pytest.fixture
def page(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The sandbox page in Chromium; a failing test leaves a screenshot and the demo's log."""
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    demo = DemoProcess([sys.executable, "-m", "bot", "demo", "--port", "0"], tmp_path)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable, headless=True, args=FLAGS
            )
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.set_default_timeout(TIMEOUT_MS)
            tab.goto(demo.url)
            yield tab
            if failed(request):
                tab.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            browser.close()
    finally:
        demo.stop()
    if failed(request):
        print(f"screenshot: {tmp_path / 'failure.png'}\nthe demo's log:\n{demo.output}")
    assert "Traceback" not in demo.output, demo.output


@pytest.mark.slow
def test_a_writer_run_reviewed_in_the_browser(page: Any) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)

    welcome = page.get_by_test_id("message").filter(has_text="Welcome to the Countersign sandbox")
    expect(welcome).to_be_visible()
    composer = page.get_by_test_id("composer")

    # A redraw keeps the nodes of messages that did not change (a click straddling a redraw
    # is otherwise lost): mark the welcome, make the channel change, find the mark again.
    welcome.evaluate("node => { node.dataset.marked = 'yes'; }")
    composer.fill("/crew help")
    composer.press("Enter")
    expect(page.locator("[data-testid=message][data-ephemeral=true]")).to_have_count(1)
    expect(welcome).to_have_attribute("data-marked", "yes")

    composer.fill("/crew run writer topic=otters")
    composer.press("Enter")
    expect(composer).to_have_value("")

    # The run's root message gets a thread; open it.
    root = page.get_by_test_id("message").filter(has_text="topic")
    page.get_by_test_id("replies-link").last.click()
    thread = page.get_by_test_id("thread-pane")
    expect(thread).to_be_visible()
    expect(root.first).to_be_visible()
    expect(thread).to_contain_text("offline scripted model")

    def button(action: str, within: Any = page) -> Any:
        return within.locator(f'[data-testid=block-button][data-action-id="countersign:{action}"]')

    # Request changes: a modal asks what to change.
    button("changes", thread).last.click()
    modal = page.get_by_test_id("modal")
    expect(modal).to_be_visible()
    modal.locator("[data-testid=modal-input][data-block-id=text]").fill(FEEDBACK)
    modal.get_by_test_id("modal-submit").click()
    expect(modal).to_be_hidden()

    # The outline comes back revised with the feedback, and is approved.
    revised = (
        thread.get_by_test_id("message").filter(has=button("approve")).filter(has_text=FEEDBACK)
    )
    expect(revised).to_have_count(1)
    revised.locator('[data-action-id="countersign:approve"]').click()
    # The decision takes the outline's buttons away: until then a click on them would be a
    # second decision, which changes nothing.
    expect(revised).to_have_count(0)

    # The article is written from the outline, reviewed and approved. Its review is found by
    # its version line, which only the article has (has_text ignores case: "article" is in
    # the outline's task, "why it matters" in its first section).
    article = (
        thread.get_by_test_id("message")
        .filter(has=button("approve"))
        .filter(has_text="Article (version 1)")
    )
    expect(article).to_have_count(1)
    article.locator('[data-action-id="countersign:approve"]').click()

    # The result is in the thread, and the root message says the run succeeded.
    expect(thread).to_contain_text("finished. Result:")
    expect(button("approve", thread)).to_have_count(0)
    expect(page.get_by_test_id("messages")).to_contain_text("Succeeded")

    # Text is text: markup in a message is shown, never run (the page builds text nodes).
    composer.fill('<img src=x onerror="window.pwned=1"> and <b>tags</b>')
    composer.press("Enter")
    mine = page.get_by_test_id("message").filter(has_text="onerror")
    expect(mine).to_contain_text('<img src=x onerror="window.pwned=1"> and <b>tags</b>')
    assert page.evaluate("window.pwned") is None
    assert mine.locator("img").count() == 0


# What the page shows as text must hold no emoji: they are drawn as icons, since a machine
# without an emoji font shows empty boxes. (A native <select> can only hold text.)
EMOJI_LEFT_AS_TEXT = r"""() => {
  const shown = /\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F/u;
  const astral = /(?=\p{Extended_Pictographic})[\u{1F000}-\u{1FFFF}]/u;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const found = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const emoji = shown.test(node.data) || astral.test(node.data);
    if (emoji && !node.parentElement.closest("select")) found.push(node.data);
  }
  return found;
}"""


@pytest.mark.slow
def test_a_gated_call_reviewed_in_the_browser_reads_plainly(page: Any) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    composer = page.get_by_test_id("composer")
    expect(page.get_by_test_id("message").first).to_be_visible()
    composer.fill("/crew run outreach to=ana@example.com topic=otters")
    composer.press("Enter")
    page.get_by_test_id("replies-link").last.click()
    thread = page.get_by_test_id("thread-pane")
    card = thread.get_by_test_id("message").filter(
        has=page.locator('[data-action-id="countersign:approve"]')
    )
    expect(card).to_have_count(1)

    # The status icons are drawn, and no emoji is left for a font to draw.
    root = page.get_by_test_id("messages").get_by_test_id("message").last
    expect(root).to_contain_text("Waiting for approval")
    status = root.locator("svg.emoji").first
    expect(status).to_be_visible()
    assert status.bounding_box()["width"] > 0
    assert page.evaluate(EMOJI_LEFT_AS_TEXT) == []

    # The call's arguments are shown once, with the body's line breaks as lines.
    shown = card.inner_text()
    assert shown.count("ana@example.com") == 1, shown
    assert "\\n" not in shown
    assert "Hi,\n\nI put together a few notes on otters" in shown

    # Edit: one-line arguments get one-line inputs, the body a box that fits its lines.
    card.locator('[data-action-id="countersign:edit"]').click()
    modal = page.get_by_test_id("modal")
    to = modal.locator('[data-testid=modal-input][data-block-id="arg:to"]')
    expect(to).to_have_value("ana@example.com")
    assert to.evaluate("node => node.tagName") == "INPUT"
    body = modal.locator('[data-testid=modal-input][data-block-id="arg:body"]')
    assert body.evaluate("node => node.tagName") == "TEXTAREA"
    lines = body.evaluate("node => node.value.split('\\n').length")
    assert int(body.get_attribute("rows") or 0) >= lines
    assert body.evaluate("node => node.scrollHeight <= node.clientHeight + 1")
    modal.get_by_test_id("modal-close").click()
    expect(modal).to_be_hidden()

    # Reject: the confirmation says what happens (the agent carries on), then the reason.
    card.locator('[data-action-id="countersign:reject"]').click()
    confirm = page.get_by_test_id("confirm-dialog")
    expect(confirm).to_contain_text("carries on")
    assert "stops this run" not in confirm.inner_text()
    confirm.get_by_test_id("confirm-yes").click()
    modal.locator("[data-testid=modal-input][data-block-id=text]").fill("not this week")
    modal.get_by_test_id("modal-submit").click()
    expect(modal).to_be_hidden()

    # The model was told who denied the call by name; the thread shows it as it read it.
    expect(thread).to_contain_text("finished. Result:")
    expect(thread).to_contain_text("send_email was denied by reviewer You: not this week")
    expect(root).to_contain_text("Succeeded")
    assert page.evaluate(EMOJI_LEFT_AS_TEXT) == []


@pytest.mark.slow
def test_a_newcomer_finds_the_safe_choice_home_and_what_they_typed(page: Any) -> None:
    """The Reject? confirmation starts on Cancel and Escape or a click beside it cancels; a
    modal reopened after a reload shows what was typed, and says so; a narrow window keeps
    Home and the connection's status, and the Home tab its side padding."""
    from playwright.sync_api import expect

    expect.set_options(timeout=TIMEOUT_MS)
    composer = page.get_by_test_id("composer")
    expect(page.get_by_test_id("message").first).to_be_visible()
    composer.fill("/crew run outreach to=ana@example.com topic=otters")
    composer.press("Enter")
    page.get_by_test_id("replies-link").last.click()
    thread = page.get_by_test_id("thread-pane")
    reject = thread.locator('[data-action-id="countersign:reject"]')
    expect(reject).to_have_count(1)
    confirm = page.get_by_test_id("confirm-dialog")
    modal = page.get_by_test_id("modal")

    reject.click()
    expect(confirm).to_be_visible()
    assert page.evaluate("document.activeElement.dataset.testid") == "confirm-no"
    page.keyboard.press("Escape")
    expect(confirm).to_be_hidden()
    reject.click()
    page.mouse.click(5, 5)  # beside the dialog
    expect(confirm).to_be_hidden()
    reject.click()
    page.keyboard.press("Enter")  # on Cancel
    expect(confirm).to_be_hidden()
    expect(modal).to_be_hidden()

    thread.locator('[data-action-id="countersign:edit"]').click()
    to = modal.locator('[data-testid=modal-input][data-block-id="arg:to"]')
    expect(to).to_have_value("ana@example.com")
    to.fill("ben@example.com")
    page.reload()
    expect(to).to_have_value("ben@example.com")
    expect(page.get_by_test_id("modal-restored")).to_be_visible()
    modal.get_by_test_id("modal-close").click()
    expect(modal).to_be_hidden()

    page.set_viewport_size({"width": 800, "height": 900})
    home = page.get_by_test_id("home-link")
    expect(home).to_be_visible()
    expect(page.get_by_test_id("connection")).to_be_visible()
    expect(page.get_by_test_id("connection")).to_have_text("live")
    home.click()
    view = page.get_by_test_id("home-view")
    expect(view).to_be_visible()
    expect(view).to_contain_text("Waiting for you")
    assert view.evaluate("node => getComputedStyle(node).paddingLeft") == "20px"
