"""Known wrong: the cache length is counted up before the n_ctx check, so a rejected step leaves the cache
longer, and the next valid step embeds its tokens at the wrong positions or is refused."""
import numbers

import numpy as np

from gpt2 import GPT2, GPT2Config, gelu, layer_norm, softmax

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "weak"


class KVCache:
    """Keys and values of every cached position, per block and head, up to n_ctx positions."""

    def __init__(self, config: GPT2Config):
        hs = config.n_embd // config.n_head
        shape = (config.n_layer, config.n_head, config.n_ctx, hs)  # [L, nh, n_ctx, hs]
        self.k, self.v = np.zeros(shape), np.zeros(shape)
        self.n_ctx = config.n_ctx
        self.length = 0  # positions 0 .. length - 1 are cached

    def __len__(self) -> int:
        return self.length


def _token_ids(token_ids, vocab_size: int) -> np.ndarray:
    ids = list(token_ids)
    if not ids:
        raise ValueError("decode_step needs at least one token id")
    if not all(isinstance(t, numbers.Integral) and not isinstance(t, bool) for t in ids):
        raise ValueError(f"token ids must be integers, got {ids[:5]}")
    if not all(0 <= t < vocab_size for t in ids):
        raise ValueError(f"token ids must lie in [0, {vocab_size}), got {min(ids)} .. {max(ids)}")
    return np.array(ids, dtype=np.int64)


def decode_step(model: GPT2, cache: KVCache, token_ids) -> np.ndarray:
    """Logits [T, vocab] of T new tokens at positions len(cache) .. len(cache) + T - 1."""
    cfg, p = model.config, model.params
    ids = _token_ids(token_ids, cfg.vocab_size)  # [T]
    P, T = len(cache), len(ids)  # read before anything is appended
    cache.length += T  # counted before the check: a rejected step leaves the cache longer than it was
    if P + T > cfg.n_ctx:
        raise ValueError(f"{P} cached + {T} new tokens exceed n_ctx = {cfg.n_ctx}")
    S, nh, hs = P + T, cfg.n_head, cfg.n_embd // cfg.n_head
    q_pos = P + np.arange(T)  # absolute positions of the new tokens    [T]
    k_pos = np.arange(S)  # absolute positions of every cached key          [S]
    visible = k_pos[None, :] <= q_pos[:, None]  # bottom-right causal      [T, S]

    x = p["wte.weight"][ids] + p["wpe.weight"][q_pos]  # [T, C]
    for i in range(cfg.n_layer):
        h = f"h.{i}."
        a = layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"])
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]  # new rows only  [T, 3C]
        q, k, v = (m.reshape(T, nh, hs).transpose(1, 0, 2) for m in np.split(qkv, 3, axis=1))  # [nh, T, hs]
        cache.k[i, :, P:S], cache.v[i, :, P:S] = k, v
        keys, values = cache.k[i, :, :S], cache.v[i, :, :S]  # [nh, S, hs]
        scores = q @ keys.transpose(0, 2, 1) / np.sqrt(hs)  # [nh, T, S]
        y = softmax(np.where(visible, scores, -np.inf)) @ values  # [nh, T, hs]
        y = y.transpose(1, 0, 2).reshape(T, cfg.n_embd)  # [T, C]
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"])
        x = x + gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"]) @ p[h + "mlp.c_proj.weight"] \
            + p[h + "mlp.c_proj.bias"]
    cache.length = S
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["wte.weight"].T  # [T, vocab]
