"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from tree_mask import tree_attention_mask, tree_positions


def test_types_and_shapes():
    positions = tree_positions([-1, 0, 0], 4)
    mask = tree_attention_mask([-1, 0, 0], 4)
    assert isinstance(positions, np.ndarray) and positions.dtype == np.int64 and positions.shape == (3,)
    assert isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (3, 7)


def test_a_single_draft_sees_the_cache_and_itself():
    np.testing.assert_array_equal(tree_positions([-1], 5), [5])
    assert tree_attention_mask([-1], 5).all()


def test_a_chain_is_ordinary_causal_decoding():
    chain = [-1, 0, 1]
    np.testing.assert_array_equal(tree_positions(chain, 2), [2, 3, 4])
    np.testing.assert_array_equal(tree_attention_mask(chain, 2)[:, 2:], np.tril(np.ones((3, 3), bool)))


def test_a_draft_cannot_be_its_own_parent():
    with pytest.raises(ValueError):
        tree_attention_mask([-1, 1], 3)
