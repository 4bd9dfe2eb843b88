"""Slow, obviously right specs for varlen_attention, written from absolute positions.

Every function walks the batch one sequence (or one row) at a time and never looks at the
packed layout except to find a sequence's own rows.
"""
import numpy as np

from .._oracles import attention as masked_attention  # noqa: F401  (shared; a row that sees nothing is NaN)


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


def attend(q, k, v):
    """Softmax attention of each query row over every given key (scale 1/sqrt(D))."""
    scores = q @ k.T / np.sqrt(q.shape[1])
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True) @ v


def varlen_attention(q, k, v, cu_q, cu_k) -> np.ndarray:
    """Each sequence alone: dense causal attention of its queries over its own keys."""
    out = np.zeros((q.shape[0], v.shape[1]))
    for q_rows, k_rows, q_positions in sequences(cu_q, cu_k):
        for row, q_position in zip(q_rows, q_positions):
            seen = list(k_rows)[: q_position + 1]
            out[row] = attend(q[row:row + 1], k[seen], v[seen])[0]
    return out


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
