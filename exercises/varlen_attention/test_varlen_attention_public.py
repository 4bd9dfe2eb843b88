"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from varlen_attention import left_padded_decode_mask, left_padded_positions, varlen_attention, varlen_mask


def _causal_attention(q, k, v):
    scores = q @ k.T / np.sqrt(q.shape[1])
    scores = np.where(np.tril(np.ones(scores.shape, bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True) @ v


def test_types_and_shapes():
    mask = varlen_mask([0, 2, 5], [0, 2, 5])
    assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (5, 5)
    positions = left_padded_positions(np.ones((2, 4), bool))
    assert positions.dtype == np.int64 and positions.shape == (2, 4)
    assert left_padded_decode_mask(np.ones((2, 4), bool), 2).shape == (2, 2, 4)


def test_a_single_sequence_is_ordinary_causal_attention():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((6, 4)) for _ in range(3))
    np.testing.assert_allclose(varlen_attention(q, k, v, [0, 6], [0, 6]), _causal_attention(q, k, v))


def test_two_prefills_of_equal_length_do_not_see_each_other():
    mask = varlen_mask([0, 3, 6], [0, 3, 6])
    triangle = np.tril(np.ones((3, 3), bool))
    np.testing.assert_array_equal(mask, np.kron(np.eye(2, dtype=bool), triangle))


def test_rows_without_padding():
    np.testing.assert_array_equal(left_padded_positions(np.ones((2, 3), int)), [[0, 1, 2], [0, 1, 2]])


def test_cu_seqlens_must_start_at_zero():
    with pytest.raises(ValueError):
        varlen_mask([1, 3], [1, 3])
