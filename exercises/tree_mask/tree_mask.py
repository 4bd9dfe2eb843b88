"""tree_mask: positions and attention mask for a tree of draft tokens (see README.md)."""
from typing import Sequence

import numpy as np


def tree_positions(parents: Sequence[int], P: int) -> np.ndarray:
    """int64 array [T]: the absolute position of each of the T draft tokens.

    parents[i] is -1 (draft i follows the last of the P cached tokens) or the index of an
    earlier draft. Draft i sits at position P + depth(i), where roots have depth 0.
    Raises ValueError for a bad parent pointer, or unless P is an int >= 0.
    """
    raise NotImplementedError


def tree_attention_mask(parents: Sequence[int], P: int) -> np.ndarray:
    """bool array [T, P + T]; True = draft row i may attend to that key.

    Columns 0..P-1 are the cached keys (positions 0..P-1); column P + j is draft j. Draft i
    sees every cached key, its ancestors and itself. Same arguments and errors as
    tree_positions.
    """
    raise NotImplementedError
