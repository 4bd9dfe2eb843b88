"""Known-wrong masks, and the sentence that names the one a submission matches."""
import numpy as np

from grader.checking import Explanation, Variant, explain


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


def _top_left_sentence(case):
    T, S = case
    return (f"top-left aligned: with T = {T} over S = {S:,}, row 0 sees 1 key, not {S - T + 1:,}; "
            "the new queries are the last T positions, so the triangle belongs in the bottom-right corner")


VARIANTS = [  # a case is (T, S)
    Variant("top_left_alignment", lambda c: _top_left(*c), _top_left_sentence),
    Variant("self_excluded", lambda c: _self_excluded(*c),
            lambda c: f"each query is hidden from its own key (k < q instead of k <= q): with T = {c[0]} "
                      f"over S = {c[1]}, the last row sees {c[1] - 1} keys, not {c[1]}, and a prefill's first "
                      "row sees none"),
    Variant("no_mask", lambda c: _everything(*c),
            lambda c: f"everything is visible: with T = {c[0]} over S = {c[1]}, row 0 also sees the "
                      f"{c[0] - 1} tokens after it; only T = 1 needs no mask"),
    Variant("offset_off_by_one", lambda c: _one_ahead(*c),
            lambda c: f"the diagonal is one key to the right: with T = {c[0]} over S = {c[1]}, "
                      "each row also sees the token after it"),
    Variant("reversed_causality", lambda c: _reversed(*c),
            lambda c: f"the mask points to the future (k >= q): with T = {c[0]} over S = {c[1]}, "
                      "row 0 sees its own key and later ones only"),
]


def right(case):
    T, S = case
    q, k = _positions(T, S)
    return k <= q


def explain_masks(failures) -> Explanation:
    """Which known mistakes explain every failing (case, submitted mask)."""
    return explain(VARIANTS, failures, right=right)
