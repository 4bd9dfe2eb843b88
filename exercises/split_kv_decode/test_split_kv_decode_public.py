"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np

from split_kv_decode import (attention_with_lse, merge_states, shared_prefix_attention, split_kv_attention,
                             split_ranges)


def _dense(q_row, k, v):
    """Attention of one query over every key, the slow way."""
    w = np.exp(k @ q_row / np.sqrt(len(q_row)))
    return w @ v / w.sum(), np.log(w.sum())


def test_one_query_over_three_keys():
    o, lse = attention_with_lse(np.array([[1.0]]), np.array([[0.0], [1.0], [2.0]]),
                                np.array([[1.0], [2.0], [3.0]]), np.ones((1, 3), bool))
    weights = np.exp([0.0, 1.0, 2.0])
    np.testing.assert_allclose(o, [[weights @ [1.0, 2.0, 3.0] / weights.sum()]])
    np.testing.assert_allclose(lse, [np.log(weights.sum())])


def test_two_parts_of_equal_weight_merge():
    o = np.array([[[1.0, 2.0]], [[3.0, 6.0]]])
    merged, lse = merge_states(o, np.array([[0.5], [0.5]]))
    np.testing.assert_allclose(merged, [[2.0, 4.0]])
    np.testing.assert_allclose(lse, [0.5 + np.log(2.0)])


def test_ranges_of_equal_size():
    assert list(split_ranges(12, 3)) == [(0, 4), (4, 8), (8, 12)]


def test_one_split_is_plain_decode_attention():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((1, 4)), rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
    o, lse = split_kv_attention(q, k, v, np.array([5]), np.arange(6), 1)
    want_o, want_lse = _dense(q[0], k, v)
    np.testing.assert_allclose(o, [want_o])
    np.testing.assert_allclose(lse, [want_lse])


def test_one_sequence_one_query_sees_everything():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 1, 4))
    prefix_k, prefix_v = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    suffix_k, suffix_v = rng.standard_normal((1, 2, 4)), rng.standard_normal((1, 2, 4))
    out = shared_prefix_attention(q, prefix_k, prefix_v, suffix_k, suffix_v)
    want, _ = _dense(q[0, 0], np.concatenate([prefix_k, suffix_k[0]]), np.concatenate([prefix_v, suffix_v[0]]))
    np.testing.assert_allclose(out, [[want]])
