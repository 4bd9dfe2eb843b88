"""Public tests of {id}: few and small on purpose."""
import numpy as np
from {id} import new_positions


def test_the_worked_example():
    assert np.array_equal(new_positions(2, 5), [3, 4])
