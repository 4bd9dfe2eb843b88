"""The candidate's page as newcomer 17 saw it, in real headless Chromium: the prompt rendered from its Markdown
(headings, tables, code) and never as raw `|---|` and backticks, with any markup in the text shown as text; the
kit's public tests in a read-only tab; and buttons that say what each run runs."""
import pytest

from grader import catalog

from .room_server import Server, chrome

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WAIT_SECONDS = 120
TAG = '<img src=x onerror="window.pwned = 1">'


def wait(driver, test, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.2).until(lambda d: test(d), message=what)


def css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def test_the_prompt_is_rendered_and_the_public_tests_are_a_read_only_tab(tmp_path):
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    server = Server(str(tmp_path / "s"), "-e", "decode_mask,tile_classification", "--port", "0")
    driver = None
    try:
        driver = chrome(tmp_path / "profile")
        driver.set_page_load_timeout(60)
        driver.get(server.links["candidate"])
        wait(driver, lambda d: css(d, "#ex-tile_classification .prompt table"), "the prompt's table")
        tiles = css(driver, "#ex-tile_classification .prompt")[0]
        heads = [th.text for th in css(driver, "#ex-tile_classification .prompt table th")]
        assert heads == ["class", "value", "meaning", "what the kernel does"], heads
        assert css(driver, "#ex-tile_classification .prompt table td code")[0].text == "SKIP"
        assert "classify_tiles(T: int" in css(driver, "#ex-tile_classification .prompt pre.md-code code")[0].text
        assert [h.text for h in css(driver, "#ex-tile_classification .prompt h4")][:2] == ["Conventions",
                                                                                        "Worked example"]
        assert css(driver, "#ex-tile_classification .prompt li strong")[0].text == "Positions."
        for raw in ("|---|", "```", "## ", "**"):
            assert raw not in tiles.text, raw
        assert not css(driver, "#ex-decode_mask .prompt pre:not(.md-code)")  # no longer one raw block

        markup = driver.execute_script(  # whatever the text holds stays text
            "const n = Markdown.render(arguments[0]); document.body.append(n);"
            "return [n.querySelectorAll('img, script').length, n.textContent, n.querySelector('strong').textContent,"
            " n.querySelector('code').textContent];",
            f"# {TAG}\n\n| a | b |\n|---|---|\n| {TAG} | `<b>x</b>` |\n\n- **{TAG}**\n\n"
            "<script>window.pwned = 2</script>")
        assert markup[0] == 0 and markup[1].count(TAG) == 3 and "<script>" in markup[1], markup
        assert markup[2] == TAG and markup[3] == "<b>x</b>", markup
        assert driver.execute_script("return window.pwned === undefined")

        kit = catalog.get("decode_mask").public_tests[0]
        tabs = [t.text for t in css(driver, "#ex-decode_mask .tab")]
        assert tabs == ["decode_mask.py", "test_decode_mask.py", f"{kit.name} (read-only)"], tabs
        assert [t.text for t in css(driver, "#ex-tile_classification .tab")] == [
            "tile_classification.py", "test_tile_classification_public.py (read-only)"]
        css(driver, "#ex-decode_mask .tab.readonly")[0].click()
        pane = css(driver, f"#ex-decode_mask .pane[data-file='{kit.name}']")[0]
        wait(driver, lambda d: pane.is_displayed(), "the public tests' pane")
        content = pane.find_element("css selector", ".cm-content")
        assert content.get_attribute("contenteditable") == "false"
        assert "def test_" in content.text

        buttons = [b.text for b in css(driver, "#ex-decode_mask button.action")]
        assert buttons == ["Run public tests", "Run my tests", "Submit"], buttons
        says = css(driver, "#ex-decode_mask .what-runs")[0].text
        assert kit.name in says and "test_decode_mask.py" in says, says
        assert [b.text for b in css(driver, "#ex-tile_classification button.action")] == ["Run public tests",
                                                                                            "Submit"]
    finally:
        if driver is not None:
            driver.quit()
        server.stop()
