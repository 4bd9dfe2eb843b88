"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from fused_attention import flash_attention
from kv_source import KVSource


def dense_attention(q, k, v, q_positions, k_positions):
    """Plain causal attention, one row at a time (no window, every slot filled)."""
    out = np.zeros_like(q)
    for i, p in enumerate(q_positions):
        seen = k_positions <= p
        s = k[seen] @ q[i] / np.sqrt(q.shape[1])
        w = np.exp(s - s.max())
        out[i] = (w / w.sum()) @ v[seen]
    return out


def random_kv(S, D, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((S, D)), rng.standard_normal((S, D))


def test_returns_output_and_lse_of_the_right_shapes():
    k, v = random_kv(5, 4)
    o, lse = flash_attention(np.ones((2, 4)), KVSource(k, v), np.array([3, 4]), block_q=1, block_k=2)
    assert o.shape == (2, 4) and lse.shape == (2,)


def test_plain_decode_sees_every_key():
    k, v = random_kv(7, 3)
    q = np.ones((1, 3))
    o, _ = flash_attention(q, KVSource(k, v), np.array([6]), block_q=1, block_k=3)
    np.testing.assert_allclose(o, dense_attention(q, k, v, [6], np.arange(7)), atol=1e-12)


def test_prefill_is_causal():
    k, v = random_kv(6, 2, seed=1)
    q = np.random.default_rng(2).standard_normal((6, 2))
    o, _ = flash_attention(q, KVSource(k, v), np.arange(6), block_q=2, block_k=4)
    np.testing.assert_allclose(o, dense_attention(q, k, v, np.arange(6), np.arange(6)), atol=1e-12)


def test_decode_never_loads_beyond_the_cache():
    k, v = random_kv(10, 2)
    source = KVSource(k, v)
    flash_attention(np.ones((1, 2)), source, np.array([9]), block_q=1, block_k=4)
    assert source.loaded_keys() == list(range(10))


def test_window_must_be_positive():
    k, v = random_kv(4, 2)
    with pytest.raises(ValueError):
        flash_attention(np.ones((1, 2)), KVSource(k, v), np.array([3]), window=0)
