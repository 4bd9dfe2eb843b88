"""Public tests: small on purpose. Passing them proves little; see README.md."""
import math

import numpy as np

from rope_cache import RopeKVCache, rope, rope_attention_step


def test_position_zero_turns_nothing():
    x = np.random.default_rng(0).standard_normal((3, 2, 6))
    np.testing.assert_allclose(rope(x, [0, 0, 0]), x)


def test_one_pair_turns_by_the_position():
    # D = 2: a single pair (0, 1) turning by p radians, like a complex number times e^(i p).
    out = rope(np.array([[[1.0, 0.0]]]), [1])
    np.testing.assert_allclose(out, [[[math.cos(1.0), math.sin(1.0)]]])


def test_first_token_sees_only_itself():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 3, 4)) for _ in range(3))
    cache = RopeKVCache(3, 4)
    out = rope_attention_step(cache, q, k, v)
    np.testing.assert_allclose(out, v)
    assert len(cache) == 1
    np.testing.assert_allclose(cache.values, v)
    assert cache.keys.shape == (1, 3, 4)


def test_an_empty_step_changes_nothing():
    cache = RopeKVCache(2, 4)
    out = rope_attention_step(cache, *(np.zeros((0, 2, 4)) for _ in range(3)))
    assert out.shape == (0, 2, 4) and len(cache) == 0
