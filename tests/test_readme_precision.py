"""The README states section 1's precision constant as the checking toolkit applies it."""
import re
from pathlib import Path

import numpy as np

from grader.checking import PRECISION, close, tolerance

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readme_states_the_constant_in_force():
    stated = re.search(r"`(\d+) \* eps\(dtype\) \* max\(1, m\) \* max\(1, \|expected\|\)`", README.read_text())
    assert stated and int(stated.group(1)) == PRECISION


def test_float32_inputs_earn_float32_room_and_float64_inputs_do_not():
    x32 = np.ones(3, np.float32)
    assert tolerance((x32,), magnitude=1e4) == PRECISION * float(np.finfo(np.float32).eps) * 1e4
    want = np.array([0.5, -2.0, 1.0])
    float32_rounding = want.astype(np.float32).astype(np.float64) + 3e-7
    assert close(float32_rounding, want, inputs=(x32,))
    assert not close(float32_rounding, want, inputs=(want,))  # the same error on float64 inputs is wrong
    assert not close(np.array([np.nan, -2.0, 1.0]), want, inputs=(x32,))
    assert close(np.array([-np.inf]), np.array([-np.inf])) and not close(np.array([-1e300]), np.array([-np.inf]))
