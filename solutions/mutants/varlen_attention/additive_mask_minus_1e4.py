"""Known wrong: a sequence's hidden (future) keys get -1e4 added to their scaled score instead of
being left out. Scores reach +-1e4 (section 1), so a hidden key scoring 1e4 lands at 0, above a
seen key at -1e4, and takes the row's weight.
"""
import numpy as np

EXPECTED_DIAGNOSIS = ()  # a wrong value at extreme scores: no named mistake
EXPECTED_LEVEL = "weak"


def _int_array(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or array.size < 2 or (array.dtype.kind not in "iu"):
        raise ValueError(f"{name} must be a 1-D integer array of length >= 2, got {array.dtype} "
                         f"of shape {array.shape}")
    return array.astype(np.int64)


def _validated(cu_seqlens_q, cu_seqlens_k) -> tuple[np.ndarray, np.ndarray]:
    cu_q, cu_k = _int_array(cu_seqlens_q, "cu_seqlens_q"), _int_array(cu_seqlens_k, "cu_seqlens_k")
    if cu_q.size != cu_k.size:
        raise ValueError(f"cu_seqlens_q has {cu_q.size} entries, cu_seqlens_k {cu_k.size}: "
                         "one batch needs equal lengths")
    for name, cu in (("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k)):
        if cu[0] != 0 or (np.diff(cu) < 0).any():
            raise ValueError(f"{name} must start at 0 and never decrease, got {cu.tolist()[:12]}")
    n_q, n_k = np.diff(cu_q), np.diff(cu_k)
    if (n_q > n_k).any():
        b = int(np.flatnonzero(n_q > n_k)[0])
        raise ValueError(f"sequence {b} has {n_q[b]} queries but only {n_k[b]} keys (needs n_q <= n_k)")
    return cu_q, cu_k


def _row_sequences(cu: np.ndarray) -> np.ndarray:
    """The sequence each packed row belongs to (empty sequences own no row)."""
    return np.searchsorted(cu, np.arange(cu[-1]), side="right") - 1


def varlen_mask(cu_seqlens_q, cu_seqlens_k) -> np.ndarray:
    """bool [total_q, total_k]: a query sees the keys of its own sequence up to its position."""
    cu_q, cu_k = _validated(cu_seqlens_q, cu_seqlens_k)
    seq_q, seq_k = _row_sequences(cu_q), _row_sequences(cu_k)  # [total_q], [total_k]
    n_q, n_k = np.diff(cu_q), np.diff(cu_k)  # [B]
    # a sequence's queries are its last n_q positions: they start at n_k - n_q
    q_pos = np.arange(cu_q[-1]) - cu_q[seq_q] + (n_k - n_q)[seq_q]  # [total_q]
    k_pos = np.arange(cu_k[-1]) - cu_k[seq_k]  # [total_k]
    same_sequence = seq_q[:, None] == seq_k[None, :]  # [total_q, total_k]
    return same_sequence & (k_pos[None, :] <= q_pos[:, None])


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k) -> np.ndarray:
    """[total_q, D]: each sequence attends causally over its own keys, one sequence at a time."""
    cu_q, cu_k = _validated(cu_seqlens_q, cu_seqlens_k)
    q, k, v = (np.asarray(x) for x in (q, k, v))
    if q.ndim != 2 or k.ndim != 2 or k.shape != v.shape or q.shape[1] != k.shape[1]:
        raise ValueError(f"q [total_q, D], k [total_k, D], v [total_k, D] expected, got "
                         f"{q.shape}, {k.shape}, {v.shape}")
    if q.shape[0] != cu_q[-1] or k.shape[0] != cu_k[-1]:
        raise ValueError(f"q has {q.shape[0]} rows and k, v {k.shape[0]}; cu_seqlens say "
                         f"{cu_q[-1]} and {cu_k[-1]}")
    out = np.zeros((q.shape[0], v.shape[1]))  # [total_q, D]
    for b in range(cu_q.size - 1):
        qs, ks = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        n_q, n_k = qs.stop - qs.start, ks.stop - ks.start
        if n_q == 0:
            continue
        q_pos = (n_k - n_q) + np.arange(n_q)  # [n_q]
        k_pos = np.arange(n_k)  # [n_k]
        scores = q[qs] @ k[ks].T / np.sqrt(q.shape[1])  # [n_q, n_k]
        scores = scores + np.where(k_pos[None, :] <= q_pos[:, None], 0.0, -1e4)  # the additive mask of older code
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))  # each row sees its own key
        out[qs] = weights / weights.sum(axis=1, keepdims=True) @ v[ks]
    return out


def _validated_padding(attention_mask) -> np.ndarray:
    mask = np.asarray(attention_mask)
    if mask.ndim != 2 or mask.dtype.kind not in "biu" or not np.isin(mask, (0, 1)).all():
        raise ValueError(f"attention_mask must be a 2-D array of bools or 0/1, got {mask.dtype} "
                         f"of shape {mask.shape}")
    mask = mask.astype(bool)
    if (mask[:, :-1] & ~mask[:, 1:]).any():  # a real token followed by padding
        b = int(np.flatnonzero((mask[:, :-1] & ~mask[:, 1:]).any(axis=1))[0])
        raise ValueError(f"row {b} of attention_mask is not padding then real tokens (left padding)")
    return mask


def _positions(mask: np.ndarray) -> np.ndarray:
    """A real token's position is the count of real tokens before it in its row; padding -1."""
    return np.where(mask, np.cumsum(mask, axis=1, dtype=np.int64) - 1, -1)  # [B, L]


def left_padded_positions(attention_mask) -> np.ndarray:
    """int64 [B, L]: positions that skip the left padding (padding gets -1)."""
    return _positions(_validated_padding(attention_mask))


def left_padded_decode_mask(attention_mask, T) -> np.ndarray:
    """bool [B, T, S]: the last T columns are each row's newest tokens; each sees the real
    tokens of its own row at positions up to its own."""
    mask = _validated_padding(attention_mask)
    B, S = mask.shape
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or not 1 <= T <= S:
        raise ValueError(f"T must be an int with 1 <= T <= S = {S}, got {T!r}")
    T = int(T)  # a narrow numpy integer would overflow in S - T
    if not mask[:, S - T:].all():
        raise ValueError(f"the last {T} columns must all be real tokens in every row")
    positions = _positions(mask)  # [B, S]
    q_pos = positions[:, S - T:]  # [B, T]
    return mask[:, None, :] & (positions[:, None, :] <= q_pos[:, :, None])  # [B, T, S]
