"""The reference's own tests: what a strong candidate's test_decode_mask.py checks."""
import numpy as np
import pytest

from decode_mask import decode_causal_mask


def attention(q, k, v, mask):
    scores = np.where(mask, q @ k.T / np.sqrt(q.shape[-1]), -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("T,S", [(1, 1), (1, 9), (5, 37), (4, 4096), (13, 13), (7, 100), (3, 40_000)])
def test_matches_rule_on_absolute_positions(T, S):
    expected = np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]  # key position <= query position
    np.testing.assert_array_equal(decode_causal_mask(T, S), expected)


@pytest.mark.parametrize("T,S", [(5, 37), (3, 10), (9, 9)])
def test_incremental_attention_equals_full_sequence(T, S):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((S, 8)) for _ in range(3))
    full = attention(q, k, v, np.tril(np.ones((S, S), bool)))
    step = attention(q[-T:], k, v, decode_causal_mask(T, S))
    np.testing.assert_allclose(step, full[-T:], rtol=1e-12, atol=1e-12)


def test_masks_of_one_offset_keep_their_own_shapes():  # a memo must key on T and S, not on S - T alone
    for T in (1, 2, 5):
        assert decode_causal_mask(T, T + 3).shape == (T, T + 3)


def test_numpy_integer_sizes_work_like_ints():  # of any signed dtype that holds them, beside Python ints too
    np.testing.assert_array_equal(decode_causal_mask(np.int64(3), np.int32(8)), decode_causal_mask(3, 8))
    np.testing.assert_array_equal(decode_causal_mask(np.int8(3), 300), decode_causal_mask(3, 300))


@pytest.mark.parametrize("T,S", [(0, 4), (5, 4), (-1, 3), (1, 0)])
def test_rejects_bad_sizes(T, S):
    with pytest.raises(ValueError):
        decode_causal_mask(T, S)
