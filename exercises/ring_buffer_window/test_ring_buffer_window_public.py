"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from ring_buffer_window import RingKVCache, window_mask, windowed_attention_step


def test_new_cache_is_empty():
    cache = RingKVCache(4, 2)
    assert len(cache) == 0
    assert cache.keys.shape == cache.values.shape == (4, 2)
    np.testing.assert_array_equal(cache.positions, [-1, -1, -1, -1])


def test_append_wraps_around_the_ring():
    cache = RingKVCache(4, 2)
    rows = np.arange(12.0).reshape(6, 2)
    cache.append(rows, -rows)
    assert len(cache) == 6
    np.testing.assert_array_equal(cache.positions, [4, 5, 2, 3])
    np.testing.assert_array_equal(cache.keys[0], rows[4])


def test_worked_example_from_the_prompt():
    np.testing.assert_array_equal(window_mask(np.array([5]), np.array([4, 5, 2, 3]), 3),
                                  [[True, True, False, True]])
    np.testing.assert_array_equal(window_mask(np.array([1]), np.array([0, 1, -1, -1]), 3),
                                  [[True, True, False, False]])


def test_first_token_attends_to_itself_only():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 3)) for _ in range(3))
    cache = RingKVCache(5, 3)
    np.testing.assert_allclose(windowed_attention_step(cache, q, k, v, 2), v)
    assert len(cache) == 1


def test_window_larger_than_capacity_is_rejected():
    x = np.zeros((1, 3))
    with pytest.raises(ValueError):
        windowed_attention_step(RingKVCache(5, 3), x, x, x, 6)
