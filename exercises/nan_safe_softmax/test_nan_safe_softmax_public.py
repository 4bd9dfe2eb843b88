"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from nan_safe_softmax import finalize, masked_softmax, merge_partials, partial_attention


def test_softmax_of_the_allowed_entries():
    probs = masked_softmax(np.array([[1.0, 2.0, 3.0]]), np.array([[True, False, True]]))
    np.testing.assert_allclose(probs, [[1 / (1 + np.e ** 2), 0.0, 1 / (1 + np.e ** -2)]])


def test_row_with_nothing_allowed_is_zeros():
    probs = masked_softmax(np.array([[5.0, 6.0, 7.0]]), np.zeros((1, 3), bool))
    assert np.array_equal(probs, np.zeros((1, 3)))


def test_float32_stays_float32():
    probs = masked_softmax(np.ones((2, 4), np.float32), np.ones((2, 4), bool))
    assert probs.dtype == np.float32


def test_two_chunks_merged_equal_one_pass():
    q = np.array([[2.0]])
    a = partial_attention(q, np.array([[1.0], [2.0]]), np.array([[10.0], [20.0]]), np.ones((1, 2), bool))
    b = partial_attention(q, np.array([[0.0]]), np.array([[30.0]]), np.ones((1, 1), bool))
    m, l, o = merge_partials(a, b)
    weights = np.exp([2.0, 4.0, 0.0])
    np.testing.assert_allclose(finalize((m, l, o)), [[weights @ [10.0, 20.0, 30.0] / weights.sum()]])
    np.testing.assert_allclose(m + np.log(l), [np.log(weights.sum())])


def test_mismatched_mask_is_rejected():
    with pytest.raises(ValueError):
        masked_softmax(np.zeros((2, 3)), np.ones((2, 4), bool))
