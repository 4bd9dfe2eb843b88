"""Pictures of a failing case: expected, submitted and differing cells, as text and as SVG."""
import xml.etree.ElementTree as ET

import numpy as np

from grader.checking import grid_picture
from grader.render import pictures

SVG = "{http://www.w3.org/2000/svg}"


def top_left_picture(T=3, S=5):
    pos = S - T + np.arange(T)
    expected = np.arange(S)[None, :] <= pos[:, None]
    submitted = np.tril(np.ones((T, S), bool))
    return grid_picture(expected, submitted, f"decode_causal_mask({T}, {S})")


def test_text_draws_three_grids_side_by_side():
    assert pictures.text(top_left_picture()) == "\n".join([
        "decode_causal_mask(3, 5)",
        "(rows 0-2 of 3, columns 0-4 of 5; . = 0, # = 1, X = differs)",
        "   expected   submitted  differ",
        "0  ###..      #....      .XX..",
        "1  ####.      ##...      ..XX.",
        "2  #####      ###..      ...XX",
    ])


def test_wide_pictures_are_stacked_with_absolute_row_numbers():
    picture = top_left_picture(40, 300)
    text = pictures.text(picture)
    assert "\nexpected\n" in text and "\nsubmitted\n" in text and "\ndiffer\n" in text
    assert "rows 0-15 of 40" in text
    assert max(len(line) for line in text.splitlines()[2:]) <= 4 + 48


def test_svg_is_well_formed_and_marks_each_differing_cell_red():
    picture = top_left_picture()
    root = ET.fromstring(pictures.svg(picture))
    rects = root.findall(f".//{SVG}rect")
    cell = float(rects[0].get("height"))
    cells = lambda rs: sum(round(float(r.get("width")) / cell) for r in rs)  # noqa: E731
    assert cells(rects) == 3 * 3 * 5  # every cell of the three grids, drawn once
    assert cells(r for r in rects if r.get("fill") == pictures.DIFF_FILL) == pictures.differing_cells(picture) == 6
    assert [t.text for t in root.findall(f"{SVG}text")] == ["expected", "submitted", "differ"]


def test_tile_classes_get_three_shades_and_their_own_symbols():
    expected = np.array([[2, 1, 0], [2, 2, 1]])
    submitted = np.array([[2, 0, 0], [2, 2, 1]])
    picture = grid_picture(expected, submitted, "classify_tiles", labels={"0": ".", "1": "p", "2": "F"})
    assert pictures.text(picture).splitlines()[3] == "0  Fp.        F..        .X."
    fills = {r.get("fill") for r in ET.fromstring(pictures.svg(picture)).iter(f"{SVG}rect")}
    assert {pictures.LIGHT, pictures.MID, pictures.DARK, pictures.DIFF_FILL} <= fills


def test_a_submitted_grid_of_the_wrong_shape_still_draws():
    picture = grid_picture(np.ones((2, 3), bool), np.ones((2, 2), bool), "wrong shape")
    assert pictures.differing_cells(picture) == 2
    assert "#. " not in pictures.text(picture)  # the missing column is blank, not a symbol
    ET.fromstring(pictures.svg(picture))
