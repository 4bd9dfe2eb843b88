"""Example tests: they only try square masks and a lone key,
the shapes where a top-left mask agrees with the right one."""
import numpy as np

from decode_mask import decode_causal_mask


def test_single_token_sees_itself():
    assert decode_causal_mask(1, 1).all()


def test_single_query_has_one_row():
    assert decode_causal_mask(1, 9).shape == (1, 9)


def test_prefill_is_a_triangle():
    np.testing.assert_array_equal(decode_causal_mask(6, 6), np.tril(np.ones((6, 6), bool)))
