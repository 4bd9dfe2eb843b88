"""Known wrong, two mistakes at once: one bottom-right causal mask over the packed rows, with
no sequence boundaries and the batch's total offset (total_k - total_q)."""
import numpy as np

EXPECTED_DIAGNOSIS = "cross_sequence_attention"


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


def varlen_mask(cu_seqlens_q, cu_seqlens_k):
    cu_q, cu_k = _checked(cu_seqlens_q, cu_seqlens_k)
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    return np.arange(total_k)[None, :] <= np.arange(total_q)[:, None] + (total_k - total_q)


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k):
    cu_q, cu_k = _checked(cu_seqlens_q, cu_seqlens_k)
    if q.shape[0] != cu_q[-1] or k.shape[0] != cu_k[-1] or v.shape[0] != k.shape[0] or q.shape[1] != k.shape[1] or v.shape[1] != k.shape[1]:
        raise ValueError("q, k, v rows must match cu_seqlens")
    out = np.zeros((q.shape[0], v.shape[1]))
    offset = k.shape[0] - q.shape[0]
    for r in range(q.shape[0]):  # one row at a time: memory stays O(total_k)
        scores = k[: r + offset + 1] @ q[r] / np.sqrt(q.shape[1])
        w = np.exp(scores - scores.max())
        out[r] = w / w.sum() @ v[: r + offset + 1]
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
