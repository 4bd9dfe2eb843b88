"""Known wrong: the whole sequence again every step, then the model's counters reset so the
projections look like the new tokens only (a verdict must not rest on a counter in the child)."""
import numbers

import numpy as np

from gpt2 import GPT2, GPT2Config

EXPECTED_DIAGNOSIS = "recomputes_past"


class KVCache:
    def __init__(self, config: GPT2Config):
        self.n_ctx = config.n_ctx
        self.ids = []  # the tokens so far, fed to the model again at every step

    def __len__(self) -> int:
        return len(self.ids)


def decode_step(model: GPT2, cache: KVCache, token_ids) -> np.ndarray:
    ids = list(token_ids)
    if not ids or not all(isinstance(t, numbers.Integral) for t in ids):
        raise ValueError("token ids must be a non-empty sequence of integers")
    if not all(0 <= t < model.config.vocab_size for t in ids):
        raise ValueError(f"token ids must lie in [0, {model.config.vocab_size})")
    if len(cache) + len(ids) > model.config.n_ctx:
        raise ValueError(f"{len(cache)} cached + {len(ids)} new tokens exceed n_ctx = {model.config.n_ctx}")
    cache.ids += ids
    logits = model.forward(cache.ids)[-len(ids):]  # the whole sequence again  [T, vocab]
    model.reset_counts()  # hides the evidence from any counter living in this process
    return logits
