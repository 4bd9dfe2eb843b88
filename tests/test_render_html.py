"""The HTML report: self-contained, complete, candidate-safe, and drawn by a real browser."""
import re
from html.parser import HTMLParser

import pytest

from grader.render import html
from grader.render.common import for_candidate

from . import browser
from .render_helpers import saved_result


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.urls = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]


def parsed(text):
    parser = Tags()
    parser.feed(text)
    return parser


def test_report_is_self_contained():
    text = html.render(saved_result())
    page = parsed(text)
    assert "script" not in page.tags and "link" not in page.tags and "img" not in page.tags
    assert all(url.startswith("#") for url in page.urls)  # in-page links only
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)  # no network, bar the SVG namespace
    assert "@import" not in text and "@media print" in text


def test_report_shows_levels_diagnoses_checks_pictures_and_follow_ups():
    text = html.render(saved_result())
    assert text.index('badge big lvl-weak">weak<') < text.index('id="ex-decode_mask"')  # overall level first
    for needle in ("top_left_alignment", "caps the level at weak", "Failing checks", "random_shapes",
                   "T = 5, S = 11, seed = 0",
                   "kvgrade grade candidates/ada -e decode_mask --seed 0 --check random_shapes --feedback detail",
                   "Interviewer's observations", "to observe", "Follow-up questions", "Listen for:",
                   "Not attempted (no module found). Not counted against the candidate.",
                   "SyntaxError: invalid syntax"):
        assert needle in text, needle
    assert text.count("<svg") == 4  # one picture per failing mask check
    assert parsed(text).tags.count("section") == 3
    counts = re.findall(r"([\d,]+) (cell differs|cells differ) in this crop", text)
    assert len(counts) == 4 and all((n == "1") == (noun == "cell differs") for n, noun in counts), counts


def test_notes_are_escaped_and_kept_as_written():
    result = saved_result()
    result.exercise("decode_mask").notes = "Line one <b>bold?</b>\nLine two"
    text = html.render(result)
    assert "Line one &lt;b&gt;bold?&lt;/b&gt;\nLine two" in text


def test_candidate_report_hides_hidden_inputs_and_the_interviewer_side():
    text = html.render(for_candidate(saved_result()))
    for secret in ("decode_causal_mask(5, 11)", "T = 5", "<svg", "--check", "Follow-up", "Listen for",
                   "observations", "with T = 1 over S = 2"):
        assert secret not in text, secret
    assert "random_shapes" in text and "Random T &gt; 1 over S keys" in text
    assert 'class="badge' not in text and "caps the level" not in text  # levels hidden by default
    shown = html.render(for_candidate(saved_result(), show_levels=True))
    assert 'badge big lvl-weak">weak<' in shown


@pytest.mark.browser
def test_a_real_browser_draws_the_report(tmp_path):
    """Chromium lays the report out: the overall badge in the weak colour, every picture drawn
    at a real size, nothing wider than the window; and a screenshot to look at."""
    text = html.render(saved_result())
    drawn = browser.measure(text, """{
        badge: getComputedStyle(document.querySelector('.badge.big')).backgroundColor,
        pictures: [...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().width),
        page: document.documentElement.scrollWidth, viewport: innerWidth}""", tmp_path, width=1200)
    assert drawn["badge"] == "rgb(179, 38, 30)"  # --weak in report.css
    assert len(drawn["pictures"]) == 4 and all(width > 100 for width in drawn["pictures"])
    assert drawn["page"] <= drawn["viewport"]
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(text)
    assert browser.screenshot(page, png, tmp_path, 1200, 2000) == (1200, 2000)
    assert png.stat().st_size > 50_000  # a blank page compresses to a few KB
