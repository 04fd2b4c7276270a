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

from tests.conftest import failed
from tests.demo_process import DemoProcess

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
