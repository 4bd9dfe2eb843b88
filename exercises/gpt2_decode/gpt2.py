"""A small GPT-2 in numpy: what gpt2_decode's decode_step runs on. Given; do not edit.

Parameters are named as in GPT-2 checkpoints, so the code maps one to one onto the real
model. Linear layers store their weight as [in, out] and are applied as ``x @ W + b``
(GPT-2's Conv1D convention). Everything is float64.

    config = GPT2Config(vocab_size=97, n_ctx=83, n_embd=60, n_head=5, n_layer=2)
    model = GPT2.random(config, seed=0)
    logits = model.forward([3, 14, 15])          # [3, 97]: one row per position, causal

Counting rows (for your own tests; the grader does not read the counts): each block's ``attn.c_attn.weight``
is an ndarray subclass that notes how many input rows pass through it in a matrix product
(``x @ W``, ``np.matmul``, ``np.dot``, ``np.einsum``, ``np.tensordot``, also through views
such as ``W[:, :C]`` or ``W.T``). Apart from that it behaves as a plain float64 array, and
products with it are plain arrays. For block i, since the last ``model.reset_counts()``:
``model.rows_projected[i]`` is the total (a product with a third of the columns counts a
third of each row) and ``model.widest_projection[i]`` the most rows in any one product.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_PRODUCTS = {np.matmul, np.dot, np.einsum, np.tensordot, np.inner, np.vdot}


@dataclass(frozen=True)
class GPT2Config:
    vocab_size: int
    n_ctx: int  # positions 0 .. n_ctx - 1 have an embedding
    n_embd: int  # C
    n_head: int  # C must be a multiple of n_head; head size C // n_head
    n_layer: int

    def __post_init__(self):
        if min(self.vocab_size, self.n_ctx, self.n_embd, self.n_head, self.n_layer) < 1:
            raise ValueError(f"every size must be at least 1: {self}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")


def layer_norm(x, g, b, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def gelu(x):
    """GPT-2's tanh approximation of GELU."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


class _Tally:
    """Rows through one weight: the total, and the most in one product."""

    def __init__(self):
        self.rows, self.widest = 0.0, 0.0


class _CountedWeight(np.ndarray):
    """A float64 weight [in, out] that tallies the rows multiplied with it (see module doc)."""

    def __new__(cls, values, tally):
        out = np.asarray(values, dtype=np.float64).view(cls)
        out._tally, out._in, out._whole = tally, values.shape[0], values.size
        return out

    def __array_finalize__(self, obj):  # views and copies keep counting, as a share of the whole
        self._tally = getattr(obj, "_tally", None)
        self._in = getattr(obj, "_in", None)
        self._whole = getattr(obj, "_whole", self.size)

    def _count(self, operands):
        for other in operands:
            if isinstance(other, _CountedWeight) or self._tally is None or self._in is None:
                continue
            size = np.size(other) if not isinstance(other, str) else 0
            if size:
                rows = size / self._in
                self._tally.rows += rows * (self.size / self._whole)
                self._tally.widest = max(self._tally.widest, rows)
                return

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is np.matmul and method == "__call__":
            self._count(inputs)
        plain = [np.asarray(v) if isinstance(v, _CountedWeight) else v for v in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(v) if isinstance(v, _CountedWeight) else v
                                  for v in kwargs["out"])
        return getattr(ufunc, method)(*plain, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func not in _PRODUCTS:
            return super().__array_function__(func, types, args, kwargs)
        self._count([a for a in args if isinstance(a, np.ndarray) or isinstance(a, (list, tuple))])
        plain = [np.asarray(a) if isinstance(a, _CountedWeight) else a for a in args]
        return func(*plain, **kwargs)


class GPT2:
    def __init__(self, config: GPT2Config, params: dict):
        self.config, self.params = config, params
        self._tallies = [_Tally() for _ in range(config.n_layer)]
        for i, tally in enumerate(self._tallies):
            name = f"h.{i}.attn.c_attn.weight"
            params[name] = _CountedWeight(np.asarray(params[name]), tally)

    @property
    def rows_projected(self) -> list:
        """Rows that passed through each block's c_attn (Q, K, V projection) since the last reset."""
        return [t.rows for t in self._tallies]

    @property
    def widest_projection(self) -> list:
        """The most rows in one product with each block's c_attn since the last reset."""
        return [t.widest for t in self._tallies]

    def reset_counts(self) -> None:
        for tally in self._tallies:
            tally.rows, tally.widest = 0.0, 0.0

    @classmethod
    def random(cls, config: GPT2Config, seed: int) -> "GPT2":
        """Seeded random weights (the same seed gives the same model in any process)."""
        rng = np.random.default_rng(seed)
        C, V = config.n_embd, config.vocab_size

        def normal(shape, std):
            return rng.normal(0.0, std, shape)

        params = {"wte.weight": normal((V, C), 0.3), "wpe.weight": normal((config.n_ctx, C), 0.3)}
        for i in range(config.n_layer):
            p = f"h.{i}."
            for ln in ("ln_1", "ln_2"):
                params[p + ln + ".weight"] = 1.0 + normal(C, 0.1)
                params[p + ln + ".bias"] = normal(C, 0.1)
            for name, n_in, n_out in (("attn.c_attn", C, 3 * C), ("attn.c_proj", C, C),
                                      ("mlp.c_fc", C, 4 * C), ("mlp.c_proj", 4 * C, C)):
                params[p + name + ".weight"] = normal((n_in, n_out), 1.0 / np.sqrt(n_in))
                params[p + name + ".bias"] = normal(n_out, 0.1)
        params["ln_f.weight"] = 1.0 + normal(C, 0.1)
        params["ln_f.bias"] = normal(C, 0.1)
        return cls(config, params)

    def block(self, i: int, x: np.ndarray) -> np.ndarray:
        """Block i on a whole sequence x [T, C] starting at position 0 (causal)."""
        p, cfg = self.params, self.config
        T, C = x.shape
        nh, hs = cfg.n_head, C // cfg.n_head
        h = f"h.{i}."
        a = layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]  # [T, 3C]
        q, k, v = (m.reshape(T, nh, hs).transpose(1, 0, 2) for m in np.split(qkv, 3, axis=1))  # [nh, T, hs]
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(hs)  # [nh, T, T]
        scores = np.where(np.tri(T, dtype=bool), scores, -np.inf)  # a square prefill: lower triangle
        y = (softmax(scores) @ v).transpose(1, 0, 2).reshape(T, C)  # [T, C]
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        m = gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])  # [T, 4C]
        return x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]

    def forward(self, ids) -> np.ndarray:
        """Logits [len(ids), vocab] for the whole sequence ids, positions 0 .. len(ids) - 1."""
        ids = np.asarray(ids, dtype=np.int64)
        cfg, p = self.config, self.params
        if ids.ndim != 1 or not 1 <= len(ids) <= cfg.n_ctx:
            raise ValueError(f"need 1 to n_ctx = {cfg.n_ctx} token ids in a flat sequence, got shape {ids.shape}")
        if ids.min() < 0 or ids.max() >= cfg.vocab_size:
            raise ValueError(f"token ids must lie in [0, {cfg.vocab_size})")
        x = p["wte.weight"][ids] + p["wpe.weight"][np.arange(len(ids))]  # [T, C]
        for i in range(cfg.n_layer):
            x = self.block(i, x)
        x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
        return x @ p["wte.weight"].T  # [T, vocab], tied to the token embedding
