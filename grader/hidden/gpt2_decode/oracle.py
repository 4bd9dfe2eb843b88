"""Slow, obviously right GPT-2 logits, recomputed from the parameters one token and one head at
a time. Written from the model's definition, independently of gpt2.py's forward and of solutions/.

Every token carries two things a decode loop decides: its absolute position (which row of
wpe it adds) and the tokens it attends to. The right answer is position n and tokens 0 .. n
for the n-th token of the sequence; known-wrong decode loops differ only in those two.
"""
import math

import numpy as np


def _layer_norm(row, gain, bias):
    mean = row.mean()
    var = ((row - mean) ** 2).mean()
    return (row - mean) / math.sqrt(var + 1e-5) * gain + bias


def _gelu(values):  # GPT-2's tanh approximation, elementwise
    return 0.5 * values * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (values + 0.044715 * values ** 3)))


def logits(params: dict, n_head: int, ids, positions=None, attends=None) -> np.ndarray:
    """Logits [N, vocab] of the tokens ``ids``.

    ``positions[n]``: the wpe row token n adds (default n). ``attends[n]``: the indices of the
    tokens whose keys token n sees, each <= n (default 0 .. n). Raises IndexError when a
    position has no embedding.
    """
    p = {name: np.asarray(value, dtype=np.float64) for name, value in params.items()}
    N = len(ids)
    positions = list(range(N)) if positions is None else list(positions)
    attends = [range(n + 1) for n in range(N)] if attends is None else attends
    C = p["wte.weight"].shape[1]
    hs = C // n_head
    n_layer = sum(1 for name in p if name.endswith(".attn.c_attn.weight"))
    for n, position in enumerate(positions):
        if not 0 <= position < p["wpe.weight"].shape[0]:
            raise IndexError(f"token {n} at position {position} has no position embedding")
    x = np.array([p["wte.weight"][ids[n]] + p["wpe.weight"][positions[n]] for n in range(N)])
    for layer in range(n_layer):
        h = f"h.{layer}."
        qkv = np.array([_layer_norm(x[n], p[h + "ln_1.weight"], p[h + "ln_1.bias"])
                        @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"] for n in range(N)])
        q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
        heads = np.zeros((N, C))
        for n in range(N):
            for head in range(n_head):
                cols = slice(head * hs, (head + 1) * hs)
                seen = list(attends[n])
                scores = k[seen, cols] @ q[n, cols] / math.sqrt(hs)  # one score per seen token
                weights = np.exp(scores - scores.max())
                heads[n, cols] = weights / weights.sum() @ v[seen, cols]
        x = x + heads @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        for n in range(N):
            m = _layer_norm(x[n], p[h + "ln_2.weight"], p[h + "ln_2.bias"])
            hidden = _gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
            x[n] = x[n] + hidden @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    final = np.array([_layer_norm(x[n], p["ln_f.weight"], p["ln_f.bias"]) for n in range(N)])
    return final @ p["wte.weight"].T


def schedule_steps(chunks):
    """(P, T) of each decode_step call when a sequence is fed in chunks of the given sizes."""
    steps, P = [], 0
    for T in chunks:
        steps.append((P, T))
        P += T
    return steps


def close(got: np.ndarray, want: np.ndarray) -> bool:
    """Equal up to rounding: BLAS sums in shape-dependent orders (see TOLERANCE)."""
    return bool(np.isfinite(got).all() and np.abs(got - want).max() <= tolerance(want))


def tolerance(want: np.ndarray) -> float:
    """1e-8 times the largest expected logit magnitude (at least 1e-8): float64 rounding is ~1e-13."""
    return 1e-8 * max(1.0, float(np.abs(want).max()))
