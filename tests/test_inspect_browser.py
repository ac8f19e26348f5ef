"""The inspector's page in a real headless browser (Debian's chromium and chromedriver, driven by
Selenium; no browser is downloaded): open the one-time link, find a fact planted by the first-week
replay, search the archive (words, then a paraphrase found by meaning), open a session, a
delegated child and its parent, compare two eval reports, diff two versions, roll one back (the file on disk
changes), forget a subject after its preview. Stored ``<script>`` is shown as text, never run.
A screenshot of each view is saved: into the test's temporary folder, or, with
HERMES_CORE_SCREENSHOTS=docs/images/inspect, into the folder docs/inspect.md shows (how the
committed pictures are made), so a plain test run leaves the checkout unchanged.

Without chromium this file skips, unless HERMES_CORE_TEST_BROWSER_REQUIRED=1 (tox, CI): then a
missing browser fails.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from inspect_support import ROOT, open_stack, plant, run

SHOTS_ENV = "HERMES_CORE_SCREENSHOTS"
WAIT = 120.0  # a loaded machine: what is waited for is the page's state


def _browser_paths() -> tuple[str, str] | None:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chrome, driver) if chrome and driver else None


@pytest.fixture
def browser() -> Iterator[Any]:
    paths = _browser_paths()
    required = os.environ.get("HERMES_CORE_TEST_BROWSER_REQUIRED") == "1"
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if required:
            pytest.fail("selenium is not installed (it is in the test extra)")
        pytest.skip("selenium is not installed")
    if paths is None:
        if required:
            pytest.fail("chromium and chromedriver are required (HERMES_CORE_TEST_BROWSER_REQUIRED"
                        "=1): apt-get install -y chromium chromium-driver")
        pytest.skip("chromium/chromedriver not installed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,900", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=paths[1]), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def until(check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll real state (the page, a file) until ``check`` gives something true."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # an element not there yet
            last = exc
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f" ({last})" if last else ""))


def test_the_page_in_a_real_browser(browser, home: Path, monkeypatch: pytest.MonkeyPatch,
                                    tmp_path: Path):
    from selenium.webdriver.common.by import By

    from hermes_core.plugins.inspect.serve import start_thread

    monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
    monkeypatch.delenv("HERMES_CORE_MCP_TOKEN", raising=False)
    plant(home)
    run("memory", "add", "--target", "memory",
        "<script>window.__ran = 1</script><img src=x onerror=\"window.__ran=2\"> is just text")
    shots_dir = ROOT / os.environ[SHOTS_ENV] if os.environ.get(SHOTS_ENV) else tmp_path / "shots"
    shots_dir.mkdir(parents=True, exist_ok=True)
    memory_md = home / "memories" / "MEMORY.md"
    with open_stack(home) as stack:
        running = start_thread(stack.app)
        try:
            find = browser.find_element
            texts = lambda css: [e.text for e in browser.find_elements(By.CSS_SELECTOR, css)]  # noqa: E731
            browser.get(f"{running.url}/login?code={stack.gate.link_code()}")
            # memory: the replay's fact, and the stored markup shown as text, not run
            until(lambda: any("Rotterdam" in t for t in texts(".entry .text")), "the fact")
            assert any("<script>window.__ran = 1</script>" in t for t in texts(".entry .text"))
            assert browser.execute_script("return window.__ran === undefined")
            browser.save_screenshot(str(shots_dir / "memory.png"))

            # sessions: a search that finds the ETL conversation, then open it
            find(By.ID, "nav-sessions").click()
            until(lambda: texts("#session-list .session"), "the sessions list")
            find(By.ID, "search-q").send_keys("nightly ETL timing out")
            find(By.ID, "search-go").click()
            hit = until(lambda: browser.find_elements(By.CSS_SELECTOR, "#search-results .hit a"),
                        "a search hit")[0]
            hit.click()
            until(lambda: any("timing out" in t for t in texts("#session-view .msg .body")),
                  "the session's messages")
            browser.save_screenshot(str(shots_dir / "sessions.png"))

            # a paraphrase (no word of the question is in the message) found by meaning, once
            # the archive's background indexer has embedded every stored message
            from hermes_core.plugins.memory.session_archive.vectors import pending

            archive = stack.inspector.sessions
            archive.semantic()
            until(lambda: pending(archive.archive) == 0, "the archive's vectors", timeout=120)
            find(By.ID, "search-q").clear()
            find(By.ID, "search-q").send_keys("batch import stalls before dawn")
            find(By.ID, "search-go").click()

            def by_meaning() -> bool:
                return any(t.startswith("meaning") and "timing out" in t
                           for t in texts("#search-results .hit .mute"))

            until(by_meaning, "a hit found by meaning")

            # a delegated child session, then its parent through the link
            def click(by: str, what: str) -> bool:  # the list re-renders: find and click anew
                browser.find_element(by, what).click()
                return True

            find(By.ID, "nav-sessions").click()
            until(lambda: click(By.CSS_SELECTOR,
                                '#session-list .session[data-id="s-alice-research"]'),
                  "the child session")
            until(lambda: find(By.ID, "session-id").text == "s-alice-research", "the child")
            link = "//div[@id='session-view']//p[starts-with(., 'parent:')]/a"
            assert find(By.XPATH, link).text == "s-alice"
            until(lambda: click(By.XPATH, link), "the parent link")
            until(lambda: find(By.ID, "session-id").text == "s-alice",
                  "the parent session: " + find(By.ID, "status").text)
            assert any("s-alice-research" in t for t in texts("#session-view p"))

            # history: diff the first and the newest version, then roll back to the first
            find(By.ID, "nav-history").click()
            rows = until(lambda: browser.find_elements(By.CSS_SELECTOR, "#history-list .version"),
                         "the history")
            newest = int(rows[0].get_attribute("data-version"))
            find(By.ID, "diff-a").send_keys("1")
            find(By.ID, "diff-b").send_keys(str(newest))
            find(By.ID, "diff-go").click()
            until(lambda: texts("#diff-out .add"), "the diff's added lines")
            browser.save_screenshot(str(shots_dir / "history.png"))
            def on_disk() -> str:  # version 1 wrote USER.md only: MEMORY.md did not exist yet
                return memory_md.read_text(encoding="utf-8") if memory_md.exists() else ""

            before = on_disk()
            assert "<script>" in before
            rows[-1].find_element(By.CSS_SELECTOR, ".rollback").click()  # version 1
            browser.switch_to.alert.accept()
            until(lambda: on_disk() != before, "MEMORY.md to change")
            assert "<script>" not in on_disk()

            # recall and providers
            find(By.ID, "nav-recall").click()
            find(By.ID, "recall-q").send_keys("where does Priya work?")
            find(By.ID, "recall-go").click()
            until(lambda: find(By.ID, "recall-block").text, "the recall block")
            browser.save_screenshot(str(shots_dir / "recall.png"))
            find(By.ID, "nav-providers").click()
            until(lambda: "file_memory" in find(By.ID, "providers-out").text, "the plugins")
            until(lambda: find(By.ID, "doctor-out").text, "doctor's checks")
            browser.save_screenshot(str(shots_dir / "providers.png"))

            # eval: two reports side by side, per question type
            find(By.ID, "nav-eval").click()
            until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#eval-recall rect")) == 6,
                  "the recall chart (3 types x 2 runs)")
            rows = {r.find_elements(By.TAG_NAME, "td")[0].text: [
                td.text for td in r.find_elements(By.TAG_NAME, "td")[1:]]
                for r in browser.find_elements(By.CSS_SELECTOR, "#eval-table .eval-row")}
            assert rows["temporal"] == ["0.500", "0.000", "-0.500"]  # hybrid, words-only, B - A
            assert browser.find_elements(By.CSS_SELECTOR, "#eval-tokens rect")
            browser.save_screenshot(str(shots_dir / "eval.png"))

            # forget: preview, then confirm
            find(By.ID, "nav-forget").click()
            find(By.ID, "forget-subject").send_keys("Rotterdam")
            find(By.ID, "forget-preview").click()
            until(lambda: find(By.ID, "forget-confirm").is_displayed(), "the preview")
            assert "Rotterdam" in (home / "memories" / "USER.md").read_text(encoding="utf-8")
            browser.save_screenshot(str(shots_dir / "forget.png"))
            find(By.ID, "forget-confirm").click()
            browser.switch_to.alert.accept()
            until(lambda: browser.find_elements(By.ID, "forget-done"), "the deletion")
            assert "Rotterdam" not in (home / "memories" / "USER.md").read_text(encoding="utf-8")
        finally:
            running.stop()
