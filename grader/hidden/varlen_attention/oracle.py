"""Slow, obviously right specs for varlen_attention, written from absolute positions.

Every function walks the batch one sequence (or one row) at a time and never looks at the
packed layout except to find a sequence's own rows.
"""
import numpy as np

from .._oracles import attention as masked_attention  # noqa: F401  (shared; a row that sees nothing is NaN)
from .._oracles import attention_lse


def sequences(cu_q, cu_k):
    """For each sequence: (its query rows, its key rows, the absolute position of each query)."""
    out = []
    for b in range(len(cu_q) - 1):
        q_rows = range(int(cu_q[b]), int(cu_q[b + 1]))
        k_rows = range(int(cu_k[b]), int(cu_k[b + 1]))
        # the sequence holds positions 0..n_k-1; its queries are the last n_q of them
        first_query_position = len(k_rows) - len(q_rows)
        out.append((q_rows, k_rows, [first_query_position + i for i in range(len(q_rows))]))
    return out


def varlen_mask(cu_q, cu_k) -> np.ndarray:
    mask = np.zeros((int(cu_q[-1]), int(cu_k[-1])), dtype=bool)
    for q_rows, k_rows, q_positions in sequences(cu_q, cu_k):
        for row, q_position in zip(q_rows, q_positions):
            # key rows hold positions 0, 1, ...: the first q_position + 1 of them are visible
            mask[row, k_rows.start:k_rows.start + q_position + 1] = True
    return mask


def varlen_attention_lse(q, k, v, cu_q, cu_k) -> tuple[np.ndarray, np.ndarray]:
    """(o [total_q, D], lse [total_q]): each sequence alone, its queries over its own keys with the
    decode rule, through the kit's one masked-attention oracle."""
    o, lse = np.zeros((q.shape[0], v.shape[1])), np.full(q.shape[0], -np.inf)
    for q_rows, k_rows, q_positions in sequences(cu_q, cu_k):
        if len(q_rows):
            rows, keys = slice(q_rows.start, q_rows.stop), slice(k_rows.start, k_rows.stop)
            mask = np.arange(len(k_rows))[None, :] <= np.asarray(q_positions)[:, None]
            o[rows], lse[rows] = attention_lse(q[rows], k[keys], v[keys], mask)
    return o, lse


def varlen_attention(q, k, v, cu_q, cu_k) -> np.ndarray:
    """Each sequence alone: causal attention of its queries over its own keys."""
    return varlen_attention_lse(q, k, v, cu_q, cu_k)[0]


def left_padded_positions(attention_mask) -> np.ndarray:
    """A real token's position counts the real tokens before it in its row; padding gets -1."""
    attention_mask = np.asarray(attention_mask).astype(bool)
    positions = np.full(attention_mask.shape, -1, dtype=np.int64)
    for b, row in enumerate(attention_mask):
        real_so_far = 0
        for j, real in enumerate(row):
            if real:
                positions[b, j] = real_so_far
                real_so_far += 1
    return positions


def left_padded_decode_mask(attention_mask, T: int) -> np.ndarray:
    """Query i of a row is that row's token in column S - T + i; it sees the row's real tokens
    at positions up to its own."""
    attention_mask = np.asarray(attention_mask).astype(bool)
    positions = left_padded_positions(attention_mask)
    B, S = attention_mask.shape
    mask = np.zeros((B, T, S), dtype=bool)
    for b in range(B):
        for i in range(T):
            q_position = positions[b, S - T + i]
            mask[b, i] = attention_mask[b] & (positions[b] <= q_position)
    return mask
