"""Public tests: small on purpose. Passing them proves little; see README.md."""
import numpy as np
import pytest

from tile_classification import FULL, PARTIAL, SKIP, classify_tiles


def test_labels():
    assert (SKIP, PARTIAL, FULL) == (0, 1, 2)


def test_returns_int_array_with_one_entry_per_tile():
    grid = classify_tiles(3, 10, 2, 4)
    assert isinstance(grid, np.ndarray)
    assert grid.dtype.kind in "iu"
    assert grid.shape == (2, 3)  # ceil(3 / 2) query tiles, ceil(10 / 4) key tiles


def test_prefill_with_one_tile_per_token_is_a_triangle():
    grid = classify_tiles(3, 3, 1, 1)
    np.testing.assert_array_equal(grid, [[FULL, SKIP, SKIP],
                                         [FULL, FULL, SKIP],
                                         [FULL, FULL, FULL]])


def test_square_prefill_tiles_on_the_diagonal_are_partial():
    np.testing.assert_array_equal(classify_tiles(4, 4, 2, 2), [[PARTIAL, SKIP],
                                                               [FULL, PARTIAL]])


def test_more_queries_than_keys_is_rejected():
    with pytest.raises(ValueError):
        classify_tiles(5, 4, 2, 2)
