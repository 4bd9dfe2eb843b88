"""Known wrong: every size but block_k is made a Python int; block_k is used as given, so a narrow numpy
block_k (np.int8(100), which holds its value) beside S = 300 meets S // block_k in its own dtype, and NumPy 2
refuses a Python int past int8 there (OverflowError) on a valid call."""
import numpy as np

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "weak"

SKIP, PARTIAL, FULL = 0, 1, 2


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def validate(T, S, block_q, block_k, window=None) -> None:
    """Raise ValueError unless T, S, block_q, block_k >= 1 are ints, T <= S, window None or >= 1."""
    for name, value in (("T", T), ("S", S), ("block_q", block_q), ("block_k", block_k)):
        _check_int(name, value, 1)
    if T > S:
        raise ValueError(f"need T <= S (the new queries are among the S positions), got T={T}, S={S}")
    if window is not None:
        _check_int("window", window, 1)


def query_tile_positions(T: int, S: int, block_q: int, a):
    """Absolute positions (first, last) of query tile ``a``; the last tile may be ragged."""
    first_row = a * block_q
    last_row = np.minimum(first_row, T - block_q) + block_q - 1  # min(first + block_q, T) - 1,
    # without first + block_q, which can pass int64 when T is near 2**63
    return S - T + first_row, S - T + last_row  # row i sits at position S - T + i


def key_tile_positions(S: int, block_k: int, b):
    """Absolute positions (first, last) of key tile ``b``; the last tile may be ragged."""
    first = b * block_k
    return first, np.minimum(first, S - block_k) + block_k - 1  # min(first + block_k, S) - 1, no overflow


def seen_by_some(q_first, q_last, window=None):
    """Inclusive key range (lo, hi) that at least one query in [q_first, q_last] may see.

    Without a window lo is 0 (keys start at position 0). Keys outside it: tile is SKIP.
    """
    lo = 0 if window is None else np.maximum(q_first - window + 1, 0)
    return lo, q_last


def seen_by_all(q_first, q_last, window=None):
    """Inclusive key range (lo, hi) that every query in [q_first, q_last] may see.

    Empty (lo > hi) when the query tile spans more positions than the window. Keys inside it:
    tile is FULL.
    """
    lo = 0 if window is None else np.maximum(q_last - window + 1, 0)
    return lo, q_first


def classify_tiles(T: int, S: int, block_q: int, block_k: int, window: int | None = None) -> np.ndarray:
    """Classify every (query tile, key tile) pair as SKIP (0), PARTIAL (1) or FULL (2).

    Returns an int8 array [ceil(T / block_q), ceil(S / block_k)]. Raises ValueError unless
    T, S, block_q, block_k are ints >= 1 (bools are refused), T <= S, and window is None or
    an int >= 1.
    """
    validate(T, S, block_q, block_k, window)
    T, S, block_q = int(T), int(S), int(block_q)  # block_k as given  # Python ints: a narrow numpy
    window = None if window is None else min(int(window), S)  # size beside a large Python int must not
    # overflow; a window of S or more sees every earlier key, like no window, and fits in int64
    a = np.arange(-(-T // block_q))[:, None]  # query tile index       [nq, 1]
    b = np.arange(-(-S // block_k))[None, :]  # key tile index         [1, nk]
    q_first, q_last = query_tile_positions(T, S, block_q, a)  # [nq, 1] each
    k_first, k_last = key_tile_positions(S, block_k, b)  # [1, nk] each
    some_lo, some_hi = seen_by_some(q_first, q_last, window)
    all_lo, all_hi = seen_by_all(q_first, q_last, window)
    skip = (k_first > some_hi) | (k_last < some_lo)  # no key of the tile is seen   [nq, nk]
    full = (k_first >= all_lo) & (k_last <= all_hi)  # every key seen by every query [nq, nk]
    return np.where(skip, SKIP, np.where(full, FULL, PARTIAL)).astype(np.int8)
