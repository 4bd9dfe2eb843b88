"""Known-wrong tile classifications, and the sentence that names the one a submission matches.

Every variant is closed-form over tiles (two integers per tile edge), so it is cheap even when
S is in the hundreds of thousands; each states one classic mistake.
"""
import numpy as np

from grader.checking import Explanation, Variant, explain

SKIP, PARTIAL, FULL = 0, 1, 2


def _edges(T, S, block_q, block_k, offset=None, clamp_q=True, clamp_k=True):
    """Inclusive (q_first, q_last) per query tile [nq, 1] and (k_first, k_last) per key tile [1, nk]."""
    offset = S - T if offset is None else offset
    a = np.arange(-(-T // block_q))[:, None]
    b = np.arange(-(-S // block_k))[None, :]
    q_stop = np.minimum((a + 1) * block_q, T) if clamp_q else (a + 1) * block_q
    k_stop = np.minimum((b + 1) * block_k, S) if clamp_k else (b + 1) * block_k
    return offset + a * block_q, offset + q_stop - 1, b * block_k, k_stop - 1


def _classes(skip, full):
    return np.where(skip, SKIP, np.where(full, FULL, PARTIAL))


def _by_edges(q_first, q_last, k_first, k_last, window):
    skip = k_first > q_last
    full = k_last <= q_first
    if window is not None:
        skip = skip | (k_last <= q_first - window)
        full = full & (k_first > q_last - window)
    return _classes(skip, full)


def right(T, S, block_q, block_k, window=None):
    return _by_edges(*_edges(T, S, block_q, block_k), window)


def _top_left(T, S, block_q, block_k, window):
    return _by_edges(*_edges(T, S, block_q, block_k, offset=0), window)


def _ragged_as_full(clamp_q, clamp_k):
    """The last query tile, key tile or both unclamped (one mistake, made on either edge or both)."""
    def build(T, S, block_q, block_k, window):
        return _by_edges(*_edges(T, S, block_q, block_k, clamp_q=clamp_q, clamp_k=clamp_k), window)
    return build


def _window_plus_one(T, S, block_q, block_k, window):
    return None if window is None else right(T, S, block_q, block_k, window + 1)


def _window_minus_one(T, S, block_q, block_k, window):
    return None if window is None or window < 2 else right(T, S, block_q, block_k, window - 1)


def _window_ignored(T, S, block_q, block_k, window):
    return None if window is None else right(T, S, block_q, block_k, None)


def _swapped(T, S, block_q, block_k, window):
    grid = right(T, S, block_q, block_k, window)
    return np.where(grid == FULL, PARTIAL, np.where(grid == PARTIAL, FULL, grid))


def _tile_index_diagonal(T, S, block_q, block_k, window):
    a = np.arange(-(-T // block_q))[:, None]
    b = np.arange(-(-S // block_k))[None, :]
    return _classes(b > a, b < a)


def _ends_swapped(T, S, block_q, block_k, window):
    q_first, q_last, k_first, k_last = _edges(T, S, block_q, block_k)
    return _by_edges(q_last, q_first, k_first, k_last, window)


def _skips_own_key(T, S, block_q, block_k, window):
    q_first, q_last, k_first, k_last = _edges(T, S, block_q, block_k)
    return _by_edges(q_first, q_last - 1, k_first, k_last, window)  # skip when k_first >= q_last


def _full_strict(T, S, block_q, block_k, window):
    q_first, q_last, k_first, k_last = _edges(T, S, block_q, block_k)
    grid = _by_edges(q_first, q_last, k_first, k_last, window)
    return np.where((grid == FULL) & (k_last == q_first), PARTIAL, grid)  # FULL only when k_last < q_first


def _over_masked(T, S, block_q, block_k, window):
    """FlashAttention-2's conservative schedule: every visible tile is loaded (no tile the right
    grid calls PARTIAL or FULL is SKIP), but some FULL tiles are masked as PARTIAL."""
    grid = right(T, S, block_q, block_k, window)

    def shows(got):
        got = np.asarray(got)
        if got.shape != grid.shape:
            return False
        differ = got != grid
        return bool(differ.any() and (got[differ] == PARTIAL).all() and (grid[differ] == FULL).all())
    return shows


def _sentence_ragged(clamp_q, clamp_k):
    def sentence(T, S, block_q, block_k, window):
        short = []
        if S % block_k and not clamp_k:
            short.append(f"the last key tile holds {S % block_k} of {block_k} keys")
        if T % block_q and not clamp_q:
            short.append(f"the last query tile holds {T % block_q} of {block_q} rows")
        ends = " and ".join(what for what, clamped in (("T", clamp_q), ("S", clamp_k)) if not clamped)
        return (f"the last tiles are treated as full-size: with T = {T}, S = {S}, block_q = {block_q}, "
                f"block_k = {block_k}, {' and '.join(short)}; clamp tile ends to {ends}")
    return sentence


def _w(window):
    return "no window" if window is None else f"window {window}"


_TABLE = [  # (diagnosis id, known-wrong classification or None when it does not apply, sentence)
    ("top_left_alignment", _top_left,
     lambda T, S, bq, bk, w: f"top-left aligned: tiles are classified as if query row 0 sat at position 0; "
                             f"with T = {T} over S = {S:,} it sits at position {S - T:,} (the offset S - T), "
                             f"so the diagonal lies {S - T:,} keys to the right of where it was placed"),
    ("tile_index_diagonal", _tile_index_diagonal,
     lambda T, S, bq, bk, w: f"tiles are classified by comparing tile indices (b < a FULL, b == a PARTIAL, "
                             f"b > a SKIP), which holds only for square prefill with equal tiles; here "
                             f"T = {T}, S = {S}, block_q = {bq}, block_k = {bk}: compare positions instead"),
    *(("ragged_tiles_as_full_size", _ragged_as_full(q, k), _sentence_ragged(q, k))
      for q, k in ((False, False), (False, True), (True, False))),
    ("window_off_by_one", _window_plus_one,
     lambda T, S, bq, bk, w: f"the window admits {w + 1} keys instead of {w}: a query at position p sees "
                             f"keys p - {w - 1} .. p (k > p - W), not p - {w} .. p"),
    ("window_off_by_one", _window_minus_one,
     lambda T, S, bq, bk, w: f"the window admits {w - 1} keys instead of {w}: a query at position p sees "
                             f"keys p - {w - 1} .. p, itself included (k > p - W)"),
    ("window_ignored", _window_ignored,
     lambda T, S, bq, bk, w: f"the window is ignored: with window {w}, a query at position p may not "
                             f"see keys at or before p - {w}, so early key tiles must be SKIP"),
    ("over_masked_tiles", _over_masked,
     lambda T, S, bq, bk, w: "some tiles that every query of the tile may fully see are called PARTIAL: a "
                             "conservative schedule (FlashAttention-2 masks the last few key tiles of every "
                             "query tile) is a correct kernel but not the exact classes asked for; FULL means "
                             "every pair may attend"),
    ("full_partial_swapped", _swapped,
     lambda T, S, bq, bk, w: "FULL and PARTIAL are swapped: tiles every pair sees must be 2 (FULL, "
                             "no mask needed), tiles straddling a boundary 1 (PARTIAL)"),
    ("query_tile_ends_swapped", _ends_swapped,
     lambda T, S, bq, bk, w: "the ends of the query tile are swapped: a key tile is SKIP only when it "
                             "starts after the tile's LAST query, and FULL only when it ends at or before "
                             f"its FIRST (T = {T}, S = {S}, block_q = {bq}, block_k = {bk}, {_w(w)})"),
    ("diagonal_bound_off_by_one", _skips_own_key,
     lambda T, S, bq, bk, w: "a key tile whose first key is the last query's own position is skipped: "
                             "SKIP needs k_first > q_last, since every query sees its own key"),
    ("diagonal_bound_off_by_one", _full_strict,
     lambda T, S, bq, bk, w: "a key tile ending exactly at the query tile's first position is called "
                             "PARTIAL: it is FULL when k_last <= q_first, since every query sees its own key"),
]


VARIANTS = [Variant(i, lambda case, f=build: f(*case), lambda case, f=sentence: f(*case))
            for i, build, sentence in _TABLE]  # a case is (T, S, block_q, block_k, window)


def explain_grids(failures, passes=()) -> Explanation:
    """Which known mistakes explain every failing (case, submitted grid), and none of the cases the
    submission got right (``passes``) would have shown."""
    return explain(VARIANTS, failures, right=lambda case: right(*case), passes=passes)
