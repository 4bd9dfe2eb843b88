"""Correct, written differently: a row-to-sequence map built with np.repeat (as a kernel's
tile-to-sequence map would be), sequences processed in groups of equal counts, and left-padded
positions from each row's padding length."""
import numpy as np


def _checked(cu_seqlens_q, cu_seqlens_k):
    cu_q, cu_k = np.asarray(cu_seqlens_q), np.asarray(cu_seqlens_k)
    if cu_q.ndim != 1 or cu_k.ndim != 1 or len(cu_q) < 2 or len(cu_q) != len(cu_k):
        raise ValueError("cu_seqlens_q and cu_seqlens_k must be 1-D, of the same length >= 2")
    if not (np.issubdtype(cu_q.dtype, np.integer) and np.issubdtype(cu_k.dtype, np.integer)):
        raise ValueError("cu_seqlens must hold integers")
    cu_q, cu_k = cu_q.astype(np.int64), cu_k.astype(np.int64)
    n_q, n_k = np.diff(cu_q), np.diff(cu_k)
    if cu_q[0] or cu_k[0] or (n_q < 0).any() or (n_k < 0).any() or (n_q > n_k).any():
        raise ValueError("cu_seqlens must start at 0, never decrease, and give n_q <= n_k")
    return cu_q, cu_k, n_q, n_k


def varlen_mask(cu_seqlens_q, cu_seqlens_k):
    cu_q, cu_k, n_q, n_k = _checked(cu_seqlens_q, cu_seqlens_k)
    B = len(n_q)
    seq_of_q = np.repeat(np.arange(B), n_q)  # the map a kernel would build on the host
    seq_of_k = np.repeat(np.arange(B), n_k)
    # distance from the end of the sequence: a query at distance d sees keys at distance >= d
    q_from_end = cu_q[1:][seq_of_q] - np.arange(cu_q[-1])
    k_from_end = cu_k[1:][seq_of_k] - np.arange(cu_k[-1])
    return (seq_of_q[:, None] == seq_of_k[None, :]) & (k_from_end[None, :] >= q_from_end[:, None])


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k):
    cu_q, cu_k, n_q, n_k = _checked(cu_seqlens_q, cu_seqlens_k)
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if (q.ndim, k.ndim, v.ndim) != (2, 2, 2) or q.shape[1] != k.shape[1] or v.shape[1] != k.shape[1]:
        raise ValueError("q, k, v must be 2-D with q and k of the same width")
    if len(q) != cu_q[-1] or len(k) != cu_k[-1] or len(v) != len(k):
        raise ValueError("row counts differ from cu_seqlens")
    out = np.zeros((len(q), v.shape[1]))
    groups = {}
    for b in np.flatnonzero(n_q):
        groups.setdefault((int(n_q[b]), int(n_k[b])), []).append(b)
    for (nq, nk), members in groups.items():  # same shape: one batched product per group
        members = np.array(members)
        q_rows = cu_q[members][:, None] + np.arange(nq)  # [G, nq]
        k_rows = cu_k[members][:, None] + np.arange(nk)  # [G, nk]
        scores = np.einsum("gid,gjd->gij", q[q_rows], k[k_rows]) / np.sqrt(q.shape[1])
        visible = np.arange(nk)[None, :] - np.arange(nq)[:, None] <= nk - nq  # [nq, nk]
        scores = np.where(visible, scores, -np.inf)
        weights = np.exp(scores - scores.max(axis=2, keepdims=True))
        weights /= weights.sum(axis=2, keepdims=True)
        out[q_rows] = np.einsum("gij,gjd->gid", weights, v[k_rows])
    return out


def _pad_lengths(attention_mask):
    mask = np.asarray(attention_mask)
    if mask.ndim != 2 or not np.isin(mask, [0, 1]).all():
        raise ValueError("attention_mask must be 2-D and hold only 0/1 or booleans")
    mask = mask.astype(bool)
    pad = mask.shape[1] - mask.sum(axis=1)  # [B]
    if not np.array_equal(mask, np.arange(mask.shape[1])[None, :] >= pad[:, None]):
        raise ValueError("attention_mask must be left padding: padding first, then real tokens")
    return pad, mask


def left_padded_positions(attention_mask):
    pad, mask = _pad_lengths(attention_mask)
    return np.where(mask, np.arange(mask.shape[1])[None, :] - pad[:, None], -1).astype(np.int64)


def left_padded_decode_mask(attention_mask, T):
    pad, mask = _pad_lengths(attention_mask)
    B, S = mask.shape
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or not 0 < T <= S:
        raise ValueError(f"T must be an int in 1..{S}")
    T = int(T)  # a narrow numpy integer would overflow in S - T
    if (pad > S - T).any():
        raise ValueError("the last T columns must be real tokens in every row")
    columns = np.arange(S)
    newest = S - T + np.arange(T)  # columns of the new tokens
    return (columns[None, None, :] >= pad[:, None, None]) & (columns[None, None, :] <= newest[None, :, None])
