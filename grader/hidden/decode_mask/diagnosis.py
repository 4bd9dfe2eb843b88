"""Known-wrong masks, and the sentence that names the one a submission matches."""
import numpy as np


def _positions(T, S):
    return np.arange(S - T, S)[:, None], np.arange(S)[None, :]


def _top_left(T, S):
    return np.tril(np.ones((T, S), dtype=bool))


def _self_excluded(T, S):
    q, k = _positions(T, S)
    return k < q


def _everything(T, S):
    return np.ones((T, S), dtype=bool)


def _one_ahead(T, S):
    q, k = _positions(T, S)
    return k <= q + 1


def _reversed(T, S):
    q, k = _positions(T, S)
    return k >= q


def _sentence_top_left(T, S):
    return (f"top-left aligned: with T = {T} over S = {S:,}, row 0 sees 1 key, not {S - T + 1:,}; "
            "the new queries are the last T positions, so the triangle belongs in the bottom-right corner")


VARIANTS = [  # (diagnosis id, known-wrong mask, sentence)
    ("top_left_alignment", _top_left, _sentence_top_left),
    ("self_excluded", _self_excluded,
     lambda T, S: f"each query is hidden from its own key (k < q instead of k <= q): with T = {T} "
                  f"over S = {S}, the last row sees {S - 1} keys, not {S}, and a prefill's first row sees none"),
    ("no_mask", _everything,
     lambda T, S: f"everything is visible: with T = {T} over S = {S}, row 0 also sees the "
                  f"{T - 1} tokens after it; only T = 1 needs no mask"),
    ("offset_off_by_one", _one_ahead,
     lambda T, S: f"the diagonal is one key to the right: with T = {T} over S = {S}, "
                  "each row also sees the token after it"),
    ("reversed_causality", _reversed,
     lambda T, S: f"the mask points to the future (k >= q): with T = {T} over S = {S}, "
                  "row 0 sees its own key and later ones only"),
]


def diagnose(mask: np.ndarray, T: int, S: int):
    """(diagnosis id, sentence) for the known mistake ``mask`` equals, or None."""
    for diagnosis_id, variant, sentence in VARIANTS:
        if np.array_equal(mask, variant(T, S)):
            return diagnosis_id, sentence(T, S)
    return None
