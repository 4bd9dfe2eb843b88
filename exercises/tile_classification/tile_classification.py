"""tile_classification: which (query tile, key tile) pairs a fused kernel must compute (see README.md)."""
import numpy as np

SKIP, PARTIAL, FULL = 0, 1, 2


def classify_tiles(T: int, S: int, block_q: int, block_k: int, window: int | None = None) -> np.ndarray:
    """Class of every tile: int array [ceil(T / block_q), ceil(S / block_k)] of SKIP, PARTIAL, FULL.

    The T query rows are the T newest of the S tokens, in order; key j is at position j.
    Tile (a, b) covers query rows [a*block_q, min((a+1)*block_q, T)) and keys
    [b*block_k, min((b+1)*block_k, S)). A query at position p may attend to key k when k <= p
    and, with a window W, also k > p - W.
    SKIP: no pair of the tile may attend; FULL: every pair may; PARTIAL: otherwise.
    Never builds the T x S mask. Raises ValueError unless T, S, block_q, block_k are ints >= 1,
    T <= S, and window is None or an int >= 1 (numpy integer scalars are ints).
    """
    raise NotImplementedError
