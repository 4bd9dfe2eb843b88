"""varlen_attention: packed variable-length sequences and left-padded batches (see README.md)."""
import numpy as np


def varlen_mask(cu_seqlens_q, cu_seqlens_k) -> np.ndarray:
    """bool array [total_q, total_k]; True = query row r may attend to key row c.

    Sequence b owns query rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] and key rows
    cu_seqlens_k[b]:cu_seqlens_k[b + 1]; its queries are its newest tokens. Raises ValueError
    for malformed cu_seqlens (see README.md).
    """
    raise NotImplementedError


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k) -> np.ndarray:
    """float64 array [total_q, D]: each sequence's causal attention over its own keys.

    q [total_q, D], k and v [total_k, D]; scale 1/sqrt(D). Must not build anything of size
    total_q x total_k. Raises ValueError for malformed cu_seqlens or row counts.
    """
    raise NotImplementedError


def left_padded_positions(attention_mask) -> np.ndarray:
    """int64 array [B, L]: each real token's position as if its row had no padding; padding -1.

    attention_mask [B, L] (bool or 0/1): each row is padding (False) then real tokens (True).
    Raises ValueError otherwise.
    """
    raise NotImplementedError


def left_padded_decode_mask(attention_mask, T) -> np.ndarray:
    """bool array [B, T, S]; True = new token i of row b may attend to column j.

    The last T columns of attention_mask [B, S] are each row's T newest tokens (all real).
    Raises ValueError unless 1 <= T <= S, the padding is on the left and those columns are real.
    """
    raise NotImplementedError
