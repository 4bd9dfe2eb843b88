"""Public tests: small on purpose. Passing them proves little; see README.md."""
import math

import numpy as np
import pytest

from paged_kv_cache import PagedKVCache, paged_attention


def dense_causal_attention(q, k, v):
    """Whole-sequence causal attention, one head: q, k, v [S, D] -> [S, D]."""
    scores = q @ k.T / math.sqrt(q.shape[1])
    scores[np.triu_indices(len(q), 1)] = -np.inf
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True) @ v


def stored(cache, seq_id, pool):
    table, size = cache.block_table(seq_id), pool.shape[1]
    return np.array([pool[table[p // size], p % size] for p in range(cache.seq_len(seq_id))])


def test_new_cache_has_every_block_free():
    cache = PagedKVCache(5, 4, 2, 3)
    assert cache.key_pool.shape == cache.value_pool.shape == (5, 4, 2, 3)
    assert cache.num_free_blocks() == 5


def test_one_sequence_is_stored_through_its_block_table():
    rng = np.random.default_rng(0)
    cache = PagedKVCache(5, 4, 2, 3)
    cache.add_sequence(0)
    k, v = rng.standard_normal((6, 2, 3)), rng.standard_normal((6, 2, 3))
    cache.append(0, k, v)
    assert cache.seq_len(0) == 6
    assert len(cache.block_table(0)) == 2 and cache.num_free_blocks() == 3
    np.testing.assert_array_equal(stored(cache, 0, cache.key_pool), k)
    np.testing.assert_array_equal(stored(cache, 0, cache.value_pool), v)


def test_prefill_of_one_sequence_matches_dense_attention():
    rng = np.random.default_rng(1)
    cache = PagedKVCache(4, 4, 1, 5)
    cache.add_sequence(3)
    q, k, v = (rng.standard_normal((8, 1, 5)) for _ in range(3))
    cache.append(3, k, v)
    want = dense_causal_attention(q[:, 0], k[:, 0], v[:, 0])
    np.testing.assert_allclose(paged_attention(cache, 3, q)[:, 0], want, atol=1e-12)


def test_a_fork_holds_the_parents_tokens():
    rng = np.random.default_rng(2)
    cache = PagedKVCache(6, 4, 1, 2)
    cache.add_sequence(1)
    k = rng.standard_normal((5, 1, 2))
    cache.append(1, k, -k)
    cache.fork(1, 2)
    assert cache.seq_len(2) == 5
    np.testing.assert_array_equal(stored(cache, 2, cache.key_pool), k)


def test_running_out_of_blocks_raises_runtime_error():
    cache = PagedKVCache(2, 4, 1, 2)
    cache.add_sequence(0)
    with pytest.raises(RuntimeError):
        cache.append(0, np.zeros((9, 1, 2)), np.zeros((9, 1, 2)))
    assert cache.seq_len(0) == 0 and cache.num_free_blocks() == 2
