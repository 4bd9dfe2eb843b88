"""Pictures of a failing grid, cropped round where it goes wrong."""
from __future__ import annotations

import numpy as np

PICTURE_MAX = (16, 48)  # rows, columns of a drawn grid; larger ones are cropped round the error


def grid_picture(expected: np.ndarray, submitted: np.ndarray, title: str, labels=None,
                 keep_corner: bool = False) -> dict:
    """A 2-D picture of expected vs submitted, cropped round the first differing cell.

    ``labels`` maps values to one-character symbols (default: '#' True/1, '.' False/0).
    ``keep_corner``: for decode masks, whose diagonal ends in the bottom-right cell. When the
    corner's crop shows a difference, the picture is that crop, so a T << S mask is drawn where
    it goes wrong, not over its first 48 keys; otherwise it is cropped round the first difference.
    """
    expected, submitted = np.asarray(expected), np.asarray(submitted)
    rows, cols = expected.shape
    differ = expected != submitted if expected.shape == submitted.shape else np.zeros((rows, cols), bool)
    corner = np.s_[max(0, rows - PICTURE_MAX[0]):, max(0, cols - PICTURE_MAX[1]):]
    if keep_corner and differ[corner].any():
        top, left = max(0, rows - PICTURE_MAX[0]), max(0, cols - PICTURE_MAX[1])
    else:
        diff = np.argwhere(differ)
        r0, c0 = (diff[0] if len(diff) else (0, 0))
        top = int(max(0, min(r0 - PICTURE_MAX[0] // 2, rows - PICTURE_MAX[0])))
        left = int(max(0, min(c0 - PICTURE_MAX[1] // 2, cols - PICTURE_MAX[1])))
    crop = np.s_[top:top + PICTURE_MAX[0], left:left + PICTURE_MAX[1]]
    return {
        "kind": "grid",
        "title": title,
        "shape": [rows, cols],
        "origin": [int(top), int(left)],  # the crop's first row and column in the full grid
        "expected": expected[crop].astype(int).tolist(),
        "submitted": submitted[crop].astype(int).tolist(),
        "labels": labels or {"1": "#", "0": "."},
    }
