"""fused_attention: a tiled attention forward pass with online softmax (see README.md)."""
import numpy as np


def flash_attention(q: np.ndarray, kv, q_positions, *, window: int | None = None,
                    block_q: int = 64, block_k: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """Attention of q [T, D] over the S keys of ``kv``; returns (o [T, D], lse [T]).

    Query i sits at absolute position q_positions[i]; key j at kv.positions[j] (-1 = empty
    slot). Query p may see key k when k >= 0, k <= p and, with a window W, k > p - W. Scores
    are q . k / sqrt(D); lse is the log-sum-exp of each row's visible scores.

    Work in tiles of block_q query rows and block_k keys. Read keys and values only with
    kv.load(start, stop), and only for key tiles that some query of the current query tile
    may see; a tile every query sees needs no mask. Never allocate anything of size T x S.
    A row that sees nothing gets o = 0 and lse = -inf (no NaN, no warning). Malformed
    arguments raise ValueError.
    """
    raise NotImplementedError
