"""A correct gpt2_decode written differently: the cache keeps each block's keys and values as
[capacity, C] rows (heads side by side, not split out), grown by doubling, and attention runs
one head and one new token at a time, each query over the keys up to its own position."""
import operator

import numpy as np

from gpt2 import GPT2, GPT2Config, gelu, layer_norm


class KVCache:
    def __init__(self, config: GPT2Config):
        self.n_ctx, self.n_embd, self.n_layer = config.n_ctx, config.n_embd, config.n_layer
        self.k = [np.zeros((0, config.n_embd)) for _ in range(config.n_layer)]
        self.v = [np.zeros((0, config.n_embd)) for _ in range(config.n_layer)]
        self.length = 0

    def __len__(self):
        return self.length

    def _room(self, needed):
        """Capacity for ``needed`` rows, doubled (capped at n_ctx) when it runs out."""
        have = self.k[0].shape[0]
        if needed <= have:
            return
        size = min(self.n_ctx, max(needed, 2 * have, 8))
        for store in (self.k, self.v):
            for i, old in enumerate(store):
                grown = np.zeros((size, self.n_embd))
                grown[:have] = old
                store[i] = grown


def _ids(token_ids, vocab_size):
    ids = []
    for t in token_ids:
        if isinstance(t, (bool, np.bool_)):
            raise ValueError("token ids must be integers, not booleans")
        try:
            ids.append(operator.index(t))
        except TypeError:
            raise ValueError(f"token ids must be integers, got {t!r}") from None
    if not ids:
        raise ValueError("decode_step needs at least one token id")
    for t in ids:
        if not 0 <= t < vocab_size:
            raise ValueError(f"token id {t} is outside [0, {vocab_size})")
    return ids


def decode_step(model: GPT2, cache: KVCache, token_ids) -> np.ndarray:
    cfg, p = model.config, model.params
    ids = _ids(token_ids, cfg.vocab_size)
    start, T = len(cache), len(ids)
    if start + T > cfg.n_ctx:
        raise ValueError(f"{start} cached and {T} new tokens do not fit in n_ctx = {cfg.n_ctx}")
    cache._room(start + T)
    C, nh = cfg.n_embd, cfg.n_head
    hs = C // nh
    x = np.stack([p["wte.weight"][t] + p["wpe.weight"][start + j] for j, t in enumerate(ids)])
    for layer in range(cfg.n_layer):
        h = f"h.{layer}."
        a = layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
        cache.k[layer][start:start + T] = k
        cache.v[layer][start:start + T] = v
        y = np.zeros((T, C))
        for j in range(T):
            seen = start + j + 1  # keys at positions 0 .. start + j
            for head in range(nh):
                cols = slice(head * hs, (head + 1) * hs)
                keys, values = cache.k[layer][:seen, cols], cache.v[layer][:seen, cols]
                scores = keys @ q[j, cols] / np.sqrt(hs)
                w = np.exp(scores - scores.max())
                y[j, cols] = (w / w.sum()) @ values
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        x = x + gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"]) @ p[h + "mlp.c_proj.weight"] \
            + p[h + "mlp.c_proj.bias"]
    cache.length = start + T
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["wte.weight"].T
