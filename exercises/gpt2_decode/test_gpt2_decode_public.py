"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from gpt2 import GPT2, GPT2Config
from gpt2_decode import KVCache, decode_step

CONFIG = GPT2Config(vocab_size=31, n_ctx=13, n_embd=12, n_head=3, n_layer=2)
IDS = [4, 29, 7, 7, 0, 18, 30, 2]


@pytest.fixture
def model():
    return GPT2.random(CONFIG, seed=0)


def test_prefill_returns_one_row_of_logits_per_token(model):
    cache = KVCache(CONFIG)
    assert len(cache) == 0
    logits = decode_step(model, cache, IDS[:5])
    assert isinstance(logits, np.ndarray) and logits.shape == (5, CONFIG.vocab_size)
    assert len(cache) == 5


def test_prefill_matches_the_whole_sequence_forward(model):
    logits = decode_step(model, KVCache(CONFIG), IDS)
    np.testing.assert_allclose(logits, model.forward(IDS), rtol=1e-9, atol=1e-9)


def test_one_token_after_a_prefill(model):
    cache = KVCache(CONFIG)
    decode_step(model, cache, IDS[:-1])
    logits = decode_step(model, cache, IDS[-1:])
    np.testing.assert_allclose(logits, model.forward(IDS)[-1:], rtol=1e-9, atol=1e-9)
    assert len(cache) == len(IDS)


def test_a_prompt_longer_than_the_context_is_rejected(model):
    with pytest.raises(ValueError):
        decode_step(model, KVCache(CONFIG), list(range(CONFIG.n_ctx + 1)))
