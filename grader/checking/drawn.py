"""What checks draw: sizes (never a power of two), chunkings, and section 1's extreme values."""
from __future__ import annotations

import numpy as np


def odd_size(rng: np.random.Generator, low: int, high: int) -> int:
    """A size in [low, high) (numpy's half-open range) that is not a power of two, unless the
    range holds none: sizes that do not divide blocks are where tiling and offsets go wrong."""
    for _ in range(64):
        n = int(rng.integers(low, high))
        if n & (n - 1):
            return n
    return int(low)


def chunk_sizes(rng, tokens, low, high, p_one=0.3) -> list[int]:
    """Random chunk sizes summing to ``tokens``: T = 1 with probability ``p_one``, else low..high."""
    sizes, done = [], 0
    while done < tokens:
        T = 1 if rng.random() < p_one else int(rng.integers(low, high + 1))
        sizes.append(min(T, tokens - done))
        done += sizes[-1]
    return sizes


def odd_size_closed(rng: np.random.Generator, low: int, high: int) -> int:
    """``odd_size`` over the closed range [low, high], for checks that state their sizes so."""
    return odd_size(rng, low, high + 1)


GARBAGE_MAGNITUDE = 1e30  # section 1: a slot never attended may hold any finite value, 1e30 included


def garbage(rng: np.random.Generator, shape, dtype=np.float64, beyond_float32: bool = False) -> np.ndarray:
    """Finite values of every magnitude up to 1e30, both signs, for slots no query may attend
    (masked keys, empty or stale slots, padding, beyond a sequence's length). ``beyond_float32``
    (float64 data beside float32 inputs): half of them 1e39 .. 1e300 instead, finite and so allowed,
    but inf once cast down to float32, where an answer that casts before masking gets 0 * inf = NaN."""
    exponent = rng.integers(0, 31, shape)
    values = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.1, 1.0, shape) * 10.0 ** exponent
    values.flat[: min(values.size, 2)] = [GARBAGE_MAGNITUDE, -GARBAGE_MAGNITUDE][: min(values.size, 2)]
    if beyond_float32:
        huge = rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(39, 300, shape)
        values = np.where(rng.random(shape) < 0.5, huge, values)
    return values.astype(dtype)


def edge_windows(S: int, T: int) -> list:
    """The window sizes where the oldest of S contiguous keys enters or leaves the view of the first or the last
    of the T newest queries (one apart around S - T and S), those >= 1: where a shortcut such as "a window of
    S - 1 or more is no window" goes wrong by one."""
    return [W for W in sorted({S - T, S - T + 1, S - 1, S, S + 1}) if W >= 1]


def offset_scores(rng: np.random.Generator, offsets, n: int, D: int, dtype=np.float64, spread: float = 1.0,
                  key_offsets=None):
    """(q [T, D], k [n, D]) whose scaled scores q k^T / sqrt(D) in row i are ``offsets[i]`` plus a
    spread of about ``spread``: rows far above or far below 0 (section 1 allows [-1e4, 1e4], and a
    row whose visible scores are all below -745 still has a softmax), built from ordinary keys.
    ``key_offsets`` (D >= 2) adds ``key_offsets[j]`` to every score of key j: within one row, keys far
    apart, so the keys a mask hides can score far above the ones it shows."""
    offsets = np.asarray(offsets, dtype=np.float64)
    q = rng.standard_normal((len(offsets), D)) * spread
    k = rng.standard_normal((n, D))
    k[:, 0] = 1.0
    q[:, 0] = offsets * np.sqrt(D)
    if key_offsets is not None:
        q[:, 1] = np.sqrt(D)
        k[:, 1] = np.asarray(key_offsets, dtype=np.float64)
    return q.astype(dtype), k.astype(dtype)


def seq_ids(rng: np.random.Generator, count: int) -> tuple[int, ...]:
    """``count`` distinct sequence ids where the contract says any int: 0 and -1, then ids of a magnitude
    drawn log-uniformly up to 2^62, a quarter of them negative. A serving engine's request counter runs
    through every range; a fixed pool of small ids would leave all the others untried (red team 27: an
    answer wrong only for ids from 10 to 2^39 passed)."""
    ids = {0, -1}
    while len(ids) < count:
        bits = int(rng.integers(1, 63))
        ids.add(int(rng.integers(2 ** (bits - 1), 2**bits)) * (-1 if rng.random() < 0.25 else 1))
    return tuple(sorted(ids))
