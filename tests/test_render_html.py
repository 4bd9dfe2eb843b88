"""The HTML report: self-contained, complete, candidate-safe, and drawn by a real browser."""
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser

import pytest

from grader.render import html
from grader.render.common import for_candidate

from .render_helpers import saved_result

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


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


def chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        if os.environ.get("KVGRADE_REQUIRE_CHROMIUM") == "1":
            pytest.fail("KVGRADE_REQUIRE_CHROMIUM=1 but chromium is not installed")
        pytest.skip("chromium is not installed")
    return found


def screenshot(browser, page, png, tmp_path, size="1200,2000"):
    subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}",
                    f"--window-size={size}", page.resolve().as_uri()],
                   check=True, capture_output=True, timeout=90)


def png_pixels(path, max_rows=480):
    """Decode the top rows of an 8-bit RGB/RGBA PNG (what Chromium writes) into pixel tuples."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour = header[:4]
    assert depth == 8 and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(b"".join(chunks)), width * bpp, [], bytearray(width * bpp)
    for y in range(min(height, max_rows)):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            pred = {0: 0, 1: a, 2: b, 3: (a + b) // 2}.get(kind)
            if pred is None:  # Paeth
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[i] = (line[i] + pred) & 0xFF
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp * 4)])  # every 4th pixel is plenty
        prev = line
    return rows


def test_a_real_browser_draws_the_report(tmp_path):
    browser = chromium()
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(html.render(saved_result()))
    screenshot(browser, page, png, tmp_path)
    assert png.is_file() and png.stat().st_size > 50_000  # a blank page compresses to a few KB
    rows = png_pixels(png)  # the top of the page: title, overall level, the exercise table
    pixels = [p for row in rows[::2] for p in row]
    colours = {p for p in pixels}
    background = max(colours, key=pixels.count)
    assert len(colours) > 30  # text, badges and grids, not a blank page
    assert sum(p != background for p in pixels) > 0.02 * len(pixels)
    reds = sum(r > 150 and g < 90 and b < 90 for r, g, b in pixels)  # the weak badge, the differing cells
    assert reds > 20
