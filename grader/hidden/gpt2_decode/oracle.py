"""Slow, obviously right GPT-2 logits, recomputed from the parameters: attention one token and one
head at a time, over the very tokens it sees; the parts that read one token only (layer norms,
projections, the MLP) on every row of a matrix at once. Written from the model's definition,
independently of gpt2.py's forward and of solutions/.

Every token carries two things a decode loop decides: its absolute position (which row of
wpe it adds) and the tokens it attends to. The right answer is position n and tokens 0 .. n
for the n-th token of the sequence; known-wrong decode loops differ only in those two. A run
can be read in steps (``Tokens.then``): each step's tokens go through every layer together,
over the keys and values of the tokens before them, so a run can be replayed step by step.
"""
import math

import numpy as np

from grader import checking


def _layer_norm(rows, gain, bias):  # each row [..., C] on its own
    mean = rows.mean(axis=-1, keepdims=True)
    var = ((rows - mean) ** 2).mean(axis=-1, keepdims=True)
    return (rows - mean) / np.sqrt(var + 1e-5) * gain + bias


def _spread(rows) -> float:
    """The smallest standard deviation of the rows: a layer norm divides by it."""
    return float(np.sqrt(((rows - rows.mean(axis=-1, keepdims=True)) ** 2).mean(axis=-1)).min())


def _gelu(values):  # GPT-2's tanh approximation, elementwise
    return 0.5 * values * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (values + 0.044715 * values ** 3)))


def _rows(seen):
    """Indices of the tokens a new token sees, for indexing the cached keys: a contiguous range as a
    slice (the common case, read without gathering a copy), any other collection as a list."""
    if isinstance(seen, range) and seen.step == 1 and 0 <= seen.start < seen.stop:
        return slice(seen.start, seen.stop)
    return list(seen)


class Tokens:
    """The tokens read so far: each token's keys and values per layer, kept so a run can be
    extended one step at a time. ``then`` returns a new Tokens and leaves this one as it was,
    so several continuations of one history can be tried side by side."""

    def __init__(self, params: dict, n_head: int):
        self.p = {name: np.asarray(value, dtype=np.float64) for name, value in params.items()}
        self.n_head = n_head
        self.n_layer = sum(1 for name in self.p if name.endswith(".attn.c_attn.weight"))
        self.keys = [np.zeros((0, self.p["wte.weight"].shape[1])) for _ in range(self.n_layer)]  # [n, C]
        self.values = list(self.keys)
        self.top_score = 0.0  # the largest magnitude of a scaled score so far: section 1's m
        self.narrowest = math.inf  # the smallest standard deviation of a row a layer norm normalised

    def with_weights(self, params: dict) -> "Tokens":
        """The same cached keys and values, later tokens computed with other weights (a model
        changed between steps: what is cached stays as it was computed)."""
        changed = Tokens.__new__(Tokens)
        changed.__dict__.update(self.__dict__)
        changed.p = {name: np.asarray(value, dtype=np.float64) for name, value in params.items()}
        return changed

    def then(self, ids, positions, attends) -> tuple["Tokens", np.ndarray]:
        """(the history with the tokens ``ids`` appended, their logits [len(ids), vocab]).

        ``positions[i]``: the wpe row new token i adds; ``attends[i]``: the indices (in the whole
        history, the new tokens included) of the tokens whose keys it sees. Raises IndexError when
        a position has no embedding.
        """
        p, N = self.p, len(ids)
        C = p["wte.weight"].shape[1]
        hs = C // self.n_head
        for i, position in enumerate(positions):
            if not 0 <= position < p["wpe.weight"].shape[0]:
                raise IndexError(f"new token {i} at position {position} has no position embedding")
        after = Tokens.__new__(Tokens)
        after.p, after.n_head, after.n_layer, after.top_score = p, self.n_head, self.n_layer, self.top_score
        after.narrowest = self.narrowest
        after.keys, after.values = [], []
        x = np.array([p["wte.weight"][ids[n]] + p["wpe.weight"][positions[n]] for n in range(N)]).reshape(N, C)
        for layer in range(self.n_layer):
            h = f"h.{layer}."
            after.narrowest = min(after.narrowest, _spread(x))
            qkv = _layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"]) @ p[h + "attn.c_attn.weight"] \
                + p[h + "attn.c_attn.bias"]  # [N, 3C]: rows are independent here
            q = qkv[:, :C]
            k = np.concatenate([self.keys[layer], qkv[:, C:2 * C]])  # every token's keys  [old + N, C]
            v = np.concatenate([self.values[layer], qkv[:, 2 * C:]])
            after.keys.append(k)
            after.values.append(v)
            heads = np.zeros((N, C))
            for n in range(N):
                for head in range(self.n_head):
                    cols = slice(head * hs, (head + 1) * hs)
                    seen = _rows(attends[n])
                    scores = k[seen, cols] @ q[n, cols] / math.sqrt(hs)  # one score per seen token
                    after.top_score = max(after.top_score, float(np.abs(scores).max()))
                    weights = np.exp(scores - scores.max())
                    heads[n, cols] = weights / weights.sum() @ v[seen, cols]
            x = x + heads @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
            after.narrowest = min(after.narrowest, _spread(x))
            m = _layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])  # the MLP, each token on its own
            hidden = _gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
            x = x + hidden @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
        after.narrowest = min(after.narrowest, _spread(x))
        final = _layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
        return after, final.reshape(N, C) @ p["wte.weight"].T


def forward(params: dict, n_head: int, ids) -> tuple[Tokens, np.ndarray]:
    """(the history, logits [N, vocab]) of ``ids`` as one causal pass from position 0: the history carries
    the figures a tolerance reads (top_score, narrowest)."""
    return Tokens(params, n_head).then(ids, range(len(ids)), [range(n + 1) for n in range(len(ids))])


def logits(params: dict, n_head: int, ids, positions=None, attends=None) -> np.ndarray:
    """Logits [N, vocab] of the tokens ``ids``, read as one step.

    ``positions[n]``: the wpe row token n adds (default n). ``attends[n]``: the indices of the
    tokens whose keys token n sees, each <= n (default 0 .. n). Raises IndexError when a
    position has no embedding.
    """
    N = len(ids)
    positions = list(range(N)) if positions is None else list(positions)
    attends = [range(n + 1) for n in range(N)] if attends is None else attends
    return Tokens(params, n_head).then(ids, positions, attends)[1]


def schedule_steps(chunks):
    """(P, T) of each decode_step call when a sequence is fed in chunks of the given sizes."""
    steps, P = [], 0
    for T in chunks:
        steps.append((P, T))
        P += T
    return steps


def close(got: np.ndarray, want: np.ndarray, magnitude: float = 1.0) -> bool:
    """Section 1's precision rule (``checking.close``): the model's parameters are float64, so
    the logits may miss by ``PRECISION`` float64 ulps of the largest one (BLAS sums in
    shape-dependent orders; a careful answer measures about 15), times ``magnitude``, the
    largest scaled score when a model's scores reach past 1."""
    return bool(np.isfinite(got).all() and checking.close(got, want, magnitude=magnitude))
