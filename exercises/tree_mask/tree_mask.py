"""tree_mask: positions and attention mask for a tree of draft tokens (see README.md)."""
from typing import Sequence

import numpy as np


def tree_positions(parents: Sequence[int], P: int) -> np.ndarray:
    """int64 array [T]: the absolute position of each of the T draft tokens.

    parents[i] is -1 (draft i follows the last of the P cached tokens) or the index of an
    earlier draft. Each draft's position is the one it would have in an ordinary sequence:
    the cache, then the drafts of its own branch.
    Raises ValueError for a bad parent pointer, or unless P is an int >= 0.
    """
    raise NotImplementedError


def tree_attention_mask(parents: Sequence[int], P: int) -> np.ndarray:
    """bool array [T, P + T]; True = draft row i may attend to that key.

    Columns 0..P-1 are the cached keys (positions 0..P-1); column P + j is draft j. With this
    mask, each draft attends exactly as it would if its own branch alone had been decoded
    after the cache. Same arguments and errors as tree_positions.
    """
    raise NotImplementedError
