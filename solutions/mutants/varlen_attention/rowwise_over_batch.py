"""Known wrong (inefficient, yet correct): each query row is scored against every key of the
batch, then masked to its own sequence, so the time grows with total_q x total_k."""
import numpy as np

EXPECTED_DIAGNOSIS = "batch_sized_work"


def _cu(values):
    cu = np.asarray(values)
    if cu.ndim != 1 or cu.size < 2 or cu.dtype.kind not in "iu":
        raise ValueError("cu_seqlens must be a 1-D integer array of length >= 2")
    return cu.astype(np.int64)


def _checked(cu_seqlens_q, cu_seqlens_k):
    cu_q, cu_k = _cu(cu_seqlens_q), _cu(cu_seqlens_k)
    if cu_q.size != cu_k.size or cu_q[0] != 0 or cu_k[0] != 0:
        raise ValueError("cu_seqlens must have equal lengths and start at 0")
    if (np.diff(cu_q) < 0).any() or (np.diff(cu_k) < 0).any() or (np.diff(cu_q) > np.diff(cu_k)).any():
        raise ValueError("cu_seqlens must never decrease, with n_q <= n_k per sequence")
    return cu_q, cu_k


def _row_positions(cu_q, cu_k):
    seq_q = np.searchsorted(cu_q, np.arange(cu_q[-1]), side="right") - 1
    seq_k = np.searchsorted(cu_k, np.arange(cu_k[-1]), side="right") - 1
    q_pos = np.arange(cu_q[-1]) - cu_q[seq_q] + (np.diff(cu_k) - np.diff(cu_q))[seq_q]
    return seq_q, seq_k, q_pos, np.arange(cu_k[-1]) - cu_k[seq_k]


def varlen_mask(cu_seqlens_q, cu_seqlens_k):
    seq_q, seq_k, q_pos, k_pos = _row_positions(*_checked(cu_seqlens_q, cu_seqlens_k))
    return (seq_q[:, None] == seq_k[None, :]) & (k_pos[None, :] <= q_pos[:, None])


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k):
    cu_q, cu_k = _checked(cu_seqlens_q, cu_seqlens_k)
    if q.shape[0] != cu_q[-1] or k.shape[0] != cu_k[-1] or v.shape[0] != k.shape[0] or q.shape[1] != k.shape[1] or v.shape[1] != k.shape[1]:
        raise ValueError("q, k, v rows must match cu_seqlens")
    seq_q, seq_k, q_pos, k_pos = _row_positions(cu_q, cu_k)
    out = np.zeros((q.shape[0], v.shape[1]))
    for r in range(q.shape[0]):
        scores = k @ q[r] / np.sqrt(q.shape[1])  # every key of the batch  [total_k]
        scores = np.where((seq_k == seq_q[r]) & (k_pos <= q_pos[r]), scores, -np.inf)
        w = np.exp(scores - scores.max())
        out[r] = w / w.sum() @ v
    return out


def _padding(attention_mask):
    mask = np.asarray(attention_mask).astype(bool)
    if mask.ndim != 2 or (mask[:, :-1] & ~mask[:, 1:]).any():
        raise ValueError("attention_mask must be left padding")
    return mask


def left_padded_positions(attention_mask):
    mask = _padding(attention_mask)
    return np.where(mask, np.cumsum(mask, axis=1) - 1, -1).astype(np.int64)


def left_padded_decode_mask(attention_mask, T):
    mask = _padding(attention_mask)
    B, S = mask.shape
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)):
        raise ValueError(f"T must be an int, got {T!r}")
    if not 1 <= T <= S or not mask[:, S - T:].all():
        raise ValueError("need 1 <= T <= S with the last T columns real")
    positions = np.where(mask, np.cumsum(mask, axis=1) - 1, -1)
    return mask[:, None, :] & (positions[:, None, :] <= positions[:, S - T:, None])
