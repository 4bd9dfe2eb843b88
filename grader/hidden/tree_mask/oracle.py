"""Slow, obviously right specs for tree_mask, written from parent pointers and absolute positions.

Draft token i hangs below ``parents[i]`` (-1: below the last cached token). Its position is
P plus the number of drafts above it; it sees the P cached keys, its ancestors and itself.
The attention oracle below is what a tree step must reproduce: each draft token's output
equals plain causal decoding of the path root..token appended after the cache, with rotary
position embeddings so that positions change the answer.
"""
import numpy as np

from .._oracles import attention  # masked softmax, one row at a time


def path_to(parents, i: int) -> list[int]:
    """Drafts from the root down to ``i`` (both included), by walking the parent pointers."""
    path = [i]
    while parents[path[-1]] != -1:
        path.append(parents[path[-1]])
    return path[::-1]


def positions(parents, P: int) -> np.ndarray:
    """Token i sits at P + (number of drafts on its path) - 1. Drafts come in topological order,
    so a parent's count is known before its child's (a chain thousands deep costs one pass)."""
    on_path: list[int] = []
    for parent in parents:
        on_path.append(1 if parent == -1 else on_path[parent] + 1)
    return np.array([P + n - 1 for n in on_path], dtype=np.int64)


def mask(parents, P: int) -> np.ndarray:
    """[T, P + T]: every cached key, then the drafts on the row's own path (itself included)."""
    T = len(parents)
    out = np.zeros((T, P + T), dtype=bool)
    for i in range(T):
        out[i, :P] = True
        for j in path_to(parents, i):
            out[i, P + j] = True
    return out


# -- attention with rotary position embeddings ------------------------------------------------


def rope(x: np.ndarray, pos) -> np.ndarray:
    """Rotate consecutive pairs of x's features by angle pos * base^(-2f/D) (D even)."""
    D = x.shape[-1]
    freq = 10_000.0 ** (-np.arange(0, D, 2) / D)  # [D/2]
    angle = np.asarray(pos, dtype=float)[:, None] * freq[None, :]  # [n, D/2]
    cos, sin = np.cos(angle), np.sin(angle)
    even, odd = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2] = even * cos - odd * sin
    out[:, 1::2] = even * sin + odd * cos
    return out


def random_layer(rng, width: int, head_dim: int) -> dict:
    """Projection matrices of one attention head: x [n, width] @ W -> [n, head_dim]."""
    scale = 1 / np.sqrt(width)
    return {name: rng.standard_normal((width, head_dim)) * scale for name in ("wq", "wk", "wv")}


def causal_decode_last(layer: dict, x: np.ndarray) -> np.ndarray:
    """Plain causal attention over the sequence x (positions 0..n-1); the last token's output."""
    n = x.shape[0]
    q = rope(x[-1:] @ layer["wq"], [n - 1])  # only the newest token queries   [1, D]
    k = rope(x @ layer["wk"], np.arange(n))  # every key is at or before it       [n, D]
    return attention(q, k, x @ layer["wv"], np.ones((1, n), dtype=bool))[0]


def path_decoding(layer: dict, cache_x: np.ndarray, draft_x: np.ndarray, parents) -> np.ndarray:
    """[T, D]: row i decodes cache tokens, then the drafts root..i, as one ordinary sequence."""
    return np.stack([causal_decode_last(layer, np.concatenate([cache_x, draft_x[path_to(parents, i)]]))
                     for i in range(len(parents))])


def tree_attention(layer: dict, cache_x: np.ndarray, draft_x: np.ndarray, allowed: np.ndarray,
                   draft_pos: np.ndarray) -> np.ndarray:
    """[T, D]: all drafts in one step, keys = cache (positions 0..P-1) then drafts at draft_pos."""
    P = cache_x.shape[0]
    x = np.concatenate([cache_x, draft_x])  # [P + T, width]
    key_pos = np.concatenate([np.arange(P), draft_pos])
    q = rope(draft_x @ layer["wq"], draft_pos)
    k = rope(x @ layer["wk"], key_pos)
    return attention(q, k, x @ layer["wv"], allowed)
