"""Known-wrong tree masks and positions, and the sentence that names the one a submission matches."""
import numpy as np

from grader.checking import Explanation, Variant, explain

from . import oracle


def _corner(parents, P):
    return oracle.mask(parents, P)[:, P:]


def _with_cache(corner, P, visible=True):
    return np.concatenate([np.full((corner.shape[0], P), visible), corner], axis=1)


def _triangle(parents, P):
    return _with_cache(np.tril(np.ones((len(parents),) * 2, dtype=bool)), P)


def _parent_only(parents, P):
    T = len(parents)
    corner = np.eye(T, dtype=bool)
    for i, p in enumerate(parents):
        if p != -1:
            corner[i, p] = True
    return _with_cache(corner, P)


def _self_excluded(parents, P):
    return _with_cache(_corner(parents, P) & ~np.eye(len(parents), dtype=bool), P)


def _cache_hidden(parents, P):
    return _with_cache(_corner(parents, P), P, visible=False)


def _transposed(parents, P):
    return _with_cache(_corner(parents, P).T, P)


def _row_with_most(extra: np.ndarray) -> int:
    return int(extra.sum(axis=1).argmax())


def _say_triangle(parents, P):
    corner = _corner(parents, P)
    i = _row_with_most(np.tril(np.ones_like(corner)) & ~corner)
    return (f"a causal triangle among the drafts: with T = {len(parents)}, draft {i} sees all {i + 1} drafts "
            f"up to itself, but its own path (ancestors and itself) holds only {int(corner[i].sum())}; "
            "branches of the tree must not see each other")


def _say_parent_only(parents, P):
    depth = oracle.positions(parents, 0)
    i = int(depth.argmax())
    return (f"only the parent is visible, not every ancestor: draft {i} is at depth {int(depth[i])}, so it "
            f"should see {int(depth[i]) + 1} drafts (its ancestors and itself), not 2")


def _say_self_excluded(parents, P):
    return (f"a draft cannot see its own key: with T = {len(parents)}, every row misses the diagonal of "
            "the draft corner" + ("; with P = 0 a root then sees nothing at all" if P == 0 else ""))


def _say_cache_hidden(parents, P):
    return (f"the {P:,} cached keys are masked out: each draft must see the whole cache (columns 0..{P - 1}) "
            "as well as its ancestors")


def _say_transposed(parents, P):
    corner = _corner(parents, P)
    i = _row_with_most(corner.T & ~corner)
    return (f"the ancestor relation is transposed: draft {i} sees its descendants "
            f"({int((corner.T & ~corner)[i].sum())} of them) instead of its ancestors; row i should "
            "hold the drafts on the path from the root down to i")


MASK_VARIANTS = [  # (diagnosis id, known-wrong mask of (parents, P), sentence)
    ("triangle_tree_mask", _triangle, _say_triangle),
    ("parent_only_mask", _parent_only, _say_parent_only),
    ("self_excluded", _self_excluded, _say_self_excluded),
    ("cache_not_visible", _cache_hidden, _say_cache_hidden),
    ("descendants_not_ancestors", _transposed, _say_transposed),
]


def _first_differing(want, wrong):
    return int(np.flatnonzero(want != wrong)[0])


def _say_index(parents, P):
    want = oracle.positions(parents, P)
    i = _first_differing(want, P + np.arange(len(parents)))
    return (f"positions P + i instead of P + depth: draft {i} (depth {int(want[i]) - P}) was placed at "
            f"{P} + {i} = {P + i:,}, not {int(want[i]):,}; drafts on different branches share positions, "
            "and a draft's position counts only the drafts on its own path")


def _say_shift(shift):
    def say(parents, P):
        root = P + shift
        return (f"positions shifted by {shift:+d}: roots were placed at {root:,}, not P = {P:,}; a root "
                "is the token right after the last cached one (position P - 1), so it sits at P")
    return say


def _say_no_cache(parents, P):
    return (f"positions ignore the cache: roots were placed at 0, not P = {P:,}; the {P:,} cached tokens "
            "come first, so a draft at depth d sits at P + d")


POSITION_VARIANTS = [  # (diagnosis id, known-wrong positions of (parents, P), sentence)
    ("index_positions", lambda parents, P: P + np.arange(len(parents)), _say_index),
    ("positions_off_by_one", lambda parents, P: oracle.positions(parents, P) + 1, _say_shift(+1)),
    ("positions_off_by_one", lambda parents, P: oracle.positions(parents, P) - 1, _say_shift(-1)),
    ("positions_ignore_cache", lambda parents, P: oracle.positions(parents, 0), _say_no_cache),
]


def _variants(table):
    return [Variant(i, lambda case, f=build: f(*case), lambda case, f=say: f(*case)) for i, build, say in table]


VARIANTS = {"mask": _variants(MASK_VARIANTS), "positions": _variants(POSITION_VARIANTS)}  # a case is (parents, P)
RIGHT = {"mask": lambda case: oracle.mask(*case), "positions": lambda case: oracle.positions(*case)}


def explain_answers(kind: str, failures) -> Explanation:
    """Which known mistakes explain every failing (case, submitted answer) of ``kind``
    ("mask" or "positions")."""
    return explain(VARIANTS[kind], failures, right=RIGHT[kind])
