"""The live room as two people use it, in real headless Chromium (Selenium, Debian's chromedriver).

One interview of tree_mask: the candidate types a causal triangle over the drafts and submits;
the run shows up live on the interviewer's page with its diagnosis; the interviewer sends hint 2 and it
appears on the candidate's page; the candidate fixes the mask; the interviewer records an
observation and a note and ends the interview; the reports hold what happened. Then the server
is killed and started again on the same folder: same links, and both pages show it all.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from grader import catalog

from .room_server import COMMON, REPO, TRIANGLE, WRONG, Server, chrome

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WAIT_SECONDS = 120  # one grading under a loaded machine; every wait is bounded by it
TAG = "<img src=x onerror=\"window.pwned = 1\">"  # candidate text that would run if put in as HTML
RIGHT = COMMON + f"""
def tree_attention_mask(parents, P):  # {TAG}
    parents, P = _check(parents, P), int(P)  # P + T may pass the top of P's own dtype
    mask = np.zeros((len(parents), P + len(parents)), bool)
    for i, p in enumerate(parents):
        if p < 0:
            mask[i, :P] = True
        else:
            mask[i] = mask[p]
        mask[i, P + i] = True
    return mask
"""
HINT = " ".join(catalog.get("tree_mask").rubric.hints[1].text.split())
NOTE = "Found the offset after hint 2 <script>alert(1)</script>"


@pytest.fixture
def pages(tmp_path):
    drivers = []

    def open_page(url: str):
        driver = chrome(tmp_path / f"profile-{len(drivers)}")
        drivers.append(driver)
        driver.set_page_load_timeout(60)
        driver.get(url)
        return driver
    yield open_page
    for driver in drivers:
        driver.quit()


def wait(driver, test, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.2).until(lambda d: test(d), message=what)


def css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def type_code(driver, code: str):
    """Select all in the editor and type ``code`` as one text input (as a paste or an IME would)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    wait(driver, lambda d: css(d, "#ex-tree_mask .pane:not([hidden]) .cm-content"), "the editor")
    css(driver, "#ex-tree_mask .pane:not([hidden]) .cm-content")[0].click()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
    driver.execute_cdp_cmd("Input.insertText", {"text": code})
    typed = driver.execute_script("return document.querySelector('#ex-tree_mask .pane:not([hidden]) "
                                  ".cm-content').cmView.view.state.doc.toString()")
    assert typed == code


def submissions_done(driver) -> int:
    return len(css(driver, "#ex-tree_mask .run[data-kind='submit'][data-status='done']"))


def test_an_interview_in_the_room_end_to_end(tmp_path, pages):
    folder = tmp_path / "interview"
    server = Server(str(folder), "-e", "tree_mask", "--port", "0", "--minutes", "30")
    try:
        candidate = pages(server.links["candidate"])
        interviewer = pages(server.links["interviewer"])
        wait(interviewer, lambda d: css(d, "#ex-tree_mask .send-hint"), "the interviewer's sheet")

        type_code(candidate, WRONG)
        css(candidate, "#ex-tree_mask button.public")[0].click()
        public = "#ex-tree_mask .run[data-kind='public'][data-status='done']"
        wait(candidate, lambda d: css(d, public), "pytest's outcome of the public tests")
        assert re.search(r"\d+ passed, \d+ failed", css(candidate, public)[0].text)
        assert "tests passed" in css(interviewer, "#ex-tree_mask .runs")[0].text  # the interviewer sees it too
        css(candidate, "#ex-tree_mask button.submit")[0].click()
        wait(interviewer, lambda d: "triangle_tree_mask" in "".join(
            r.text for r in css(d, "#ex-tree_mask .run[data-kind='submit'][data-status='done']")),
            "the wrong submission, diagnosed, live on the interviewer's page")
        assert TRIANGLE.strip() in css(interviewer, "#ex-tree_mask .code")[0].text
        seed = next(str(r[5]) for r in _record(folder)[3] if r[2] == "submit")  # as stored
        assert f"(seed {seed})" in css(interviewer, "#ex-tree_mask .run[data-kind='submit']")[0].text
        assert re.fullmatch(r"\d+:\d\d left", candidate.find_element("id", "clock").text)
        wait(candidate, lambda d: submissions_done(d) == 1, "the candidate's summary")
        assert "triangle_tree_mask" not in css(candidate, "#ex-tree_mask .runs")[0].text  # summary: no diagnosis

        css(interviewer, "#ex-tree_mask .send-hint[data-number='2']")[0].click()
        wait(candidate, lambda d: [h.text for h in css(d, "#ex-tree_mask .hint")] == [f"Hint 2: {HINT}"],
             "hint 2 on the candidate's page")
        _screenshots(candidate, interviewer, tmp_path)

        type_code(candidate, RIGHT)
        css(candidate, "#ex-tree_mask button.submit")[0].click()
        wait(candidate, lambda d: submissions_done(d) == 2, "the fixed submission graded")
        wait(interviewer, lambda d: TAG in css(d, "#ex-tree_mask .code")[0].text, "the code shown as text")
        assert not css(interviewer, "#exercises img") and interviewer.execute_script("return window.pwned") is None
        criterion = css(interviewer, "#ex-tree_mask .observed li")[0].get_attribute("data-criterion")
        css(interviewer, "#ex-tree_mask .observed li .met")[0].click()
        css(interviewer, "#ex-tree_mask textarea.notes")[0].send_keys(NOTE)
        wait(interviewer, lambda d: d.find_element("id", "status").text == "saved", "the note saved")
        css(interviewer, "#end")[0].click()
        interviewer.switch_to.alert.accept()
        wait(interviewer, lambda d: len(css(d, ".report-link")) == 3, "the final reports")
        wait(candidate, lambda d: not d.find_element("id", "ended").get_attribute("hidden"), "the frozen page")
        assert css(candidate, "#ex-tree_mask button.submit")[0].get_attribute("disabled")
        assert css(candidate, "#ex-tree_mask .cm-content")[0].get_attribute("contenteditable") == "false"
        assert not interviewer.find_elements("css selector", "#exercises script")  # the note stayed text
        _check_reports(folder, criterion)
        css(interviewer, "#ex-tree_mask textarea.notes")[0].send_keys(" (after the end)")
        wait(interviewer, lambda d: d.find_element("id", "status").text == "saved", "the later note saved")
        assert tomllib.loads((folder / "notes.toml").read_text())["tree_mask"]["notes"] == NOTE + " (after the end)"
        before = _record(folder)
    finally:
        server.stop()

    again = Server(str(folder))  # killed above; resumed without options
    try:
        assert again.links == server.links
        assert _record(folder) == before
        candidate.refresh()
        interviewer.refresh()
        wait(candidate, lambda d: css(d, "#ex-tree_mask .hint") and submissions_done(d) == 2, "the candidate's page")
        assert candidate.execute_script("return document.querySelector('#ex-tree_mask .cm-content')"
                                        ".cmView.view.state.doc.toString()") == RIGHT
        assert not candidate.find_element("id", "ended").get_attribute("hidden")
        wait(interviewer, lambda d: len(css(d, ".report-link")) == 3, "the interviewer's page")
        assert css(interviewer, "#ex-tree_mask textarea.notes")[0].get_attribute("value") == NOTE + " (after the end)"
        assert css(interviewer, "#ex-tree_mask .observed li .met")[0].is_selected()
        assert css(interviewer, "#ex-tree_mask .send-hint[data-number='2']")[0].text == "sent"
        assert len(css(interviewer, "#ex-tree_mask .run[data-kind='submit']")) == 2
    finally:
        again.stop()


def _check_reports(folder: Path, criterion: str):
    result = json.loads((folder / "result.json").read_text())
    e = result["exercises"][0]
    assert e["hints_given"] == [2] and e["notes"] == NOTE
    assert e["timeline"]["runs"] == 3  # two submissions and the final grading, from the server's record
    assert [d["id"] for d in e["timeline"]["diagnoses"]][:1] == ["triangle_tree_mask"]
    assert "kept by the kvgrade serve server" in result["session"]["kept_by"].lower()
    assert e["level"] == "hire"  # right answer, capped by hint 2
    html = (folder / "report.html").read_text()
    assert "Kept by the kvgrade serve server" in html and "&lt;script&gt;" in html
    notes = tomllib.loads((folder / "notes.toml").read_text())
    assert notes["tree_mask"]["hints"] == [2] and notes["tree_mask"]["observed"] == {criterion: True}
    again = subprocess.run([sys.executable, "-m", "grader", "report", str(folder / "result.json"), "--notes",
                            str(folder / "notes.toml"), "--json", "-"], cwd=REPO, capture_output=True, text=True,
                           timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["exercises"][0]["level"] == "hire"


def _record(folder: Path) -> tuple:
    """Everything the session stored, read straight from its SQLite file."""
    import sqlite3

    db = sqlite3.connect(folder / "room.sqlite")
    try:
        return tuple(db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
                     for table in ("meta", "files", "snapshots", "runs", "events"))
    finally:
        db.close()


def _screenshots(candidate, interviewer, tmp_path: Path):
    """Both pages at 1280 px (docs/ holds them); KVGRADE_SCREENSHOTS=DIR keeps them there."""
    keep = os.environ.get("KVGRADE_SCREENSHOTS")
    for name, driver in (("room_candidate_1280.png", candidate), ("room_interviewer_1280.png", interviewer)):
        assert driver.execute_script("return window.innerWidth") == 1280
        driver.save_screenshot(str(tmp_path / name))
        if keep:
            shutil.copyfile(tmp_path / name, Path(keep) / name)
