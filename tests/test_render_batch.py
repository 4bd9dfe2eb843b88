"""The batch index fits a laptop screen with every exercise and long names, in a real browser."""
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import catalog
from grader.cli import main

from . import browser

LONG_NAME = "maria-del-carmen-fernandez-rodriguez-de-la-torre-applicant-2026-11"
SCREENSHOTS = os.environ.get("KVGRADE_SCREENSHOTS")  # a folder to keep the screenshot in, for people


def references(target: Path) -> Path:
    shutil.copytree(catalog.KIT_ROOT / "solutions", target, ignore=shutil.ignore_patterns("mutants", "__pycache__"))
    return target


@pytest.mark.slow
@pytest.mark.browser
def test_the_batch_index_fits_1280_px_with_every_exercise(tmp_path):
    browser.chromium()  # skip (or fail in CI) before grading when there is no browser
    folder = tmp_path / "candidates"
    references(folder / "grace")  # every cell of a row filled: the widest the columns get
    (folder / LONG_NAME).mkdir()  # the long name widens the name column; one graded cell is enough for that
    shutil.copyfile(catalog.KIT_ROOT / "solutions" / "tree_mask.py", folder / LONG_NAME / "tree_mask.py")
    (folder / "ada").mkdir()
    shutil.copyfile(catalog.KIT_ROOT / "solutions" / "mutants" / "decode_mask" / "top_left.py",
                    folder / "ada" / "decode_mask.py")
    (folder / "broken").mkdir()
    (folder / "broken" / "decode_mask.py").write_text("def decode_causal_mask(T, S)\n" + "    x = 1\n" * 50)
    not_a_folder = tmp_path / ("a-file-with-a-long-name-where-a-submission-folder-was-expected-" * 2 + ".txt")
    not_a_folder.write_text("not a submission")  # a broken row, with a long error
    out = tmp_path / "out"
    done = CliRunner().invoke(main, ["batch", "--seed", "0", str(folder), str(not_a_folder), "--out", str(out),
                                     "--jobs", "2"])
    assert done.exit_code == 0, done.output
    index = (out / "index.html").read_text()
    ids = [e.id for e in catalog.exercises()]
    assert all(f'title="{eid}"' in index for eid in ids)
    laid_out = browser.measure(index, """{
        page: document.documentElement.scrollWidth, viewport: innerWidth,
        frame: document.querySelector('.table-frame').scrollWidth,
        frameShown: document.querySelector('.table-frame').clientWidth,
        links: [...document.querySelectorAll('td a')].map(a => a.getBoundingClientRect().right)}""", tmp_path)
    assert laid_out["page"] <= laid_out["viewport"] == 1280  # no horizontal scrolling
    assert laid_out["frame"] <= laid_out["frameShown"]  # the table fits its card
    assert len(laid_out["links"]) == 4 and max(laid_out["links"]) <= 1280  # every report link on screen
    png = Path(SCREENSHOTS or tmp_path) / "batch_index_1280.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    assert browser.screenshot(out / "index.html", png, tmp_path) == (1280, 900)
