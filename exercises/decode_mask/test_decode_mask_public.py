"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from decode_mask import decode_causal_mask


def test_returns_bool_array_of_shape_t_by_s():
    mask = decode_causal_mask(2, 5)
    assert isinstance(mask, np.ndarray)
    assert mask.dtype == np.bool_
    assert mask.shape == (2, 5)


def test_plain_decode_single_query_sees_every_key():
    assert decode_causal_mask(1, 7).all()


def test_prefill_is_lower_triangular():
    np.testing.assert_array_equal(decode_causal_mask(3, 3), np.tril(np.ones((3, 3), bool)))


def test_more_queries_than_keys_is_rejected():
    with pytest.raises(ValueError):
        decode_causal_mask(4, 3)
