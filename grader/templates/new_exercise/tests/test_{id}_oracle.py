"""The {id} oracle against an independent statement of its rule."""
import numpy as np
import pytest

from grader.hidden.{id} import oracle


@pytest.mark.parametrize("T,S", [(1, 1), (1, 97), (45, 67), (130, 130)])
def test_the_oracle_counts_back_from_the_end(T, S):
    got = oracle.new_positions(T, S)
    assert got.dtype == np.int64 and got.shape == (T,)
    assert got[-1] == S - 1 and np.all(np.diff(got) == 1)
