"""The hidden oracle for tile_classification agrees with an independent statement of the rule."""
import numpy as np
import pytest

from grader.hidden.tile_classification import diagnosis, oracle

SKIP, PARTIAL, FULL = 0, 1, 2


def counted(T, S, block_q, block_k, window=None):
    # Stated differently on purpose: each query row sees one interval of keys; count how many
    # keys of a tile fall in it, and compare the sum with the tile's area.
    grid = []
    for a in range(0, T, block_q):
        row = []
        for b in range(0, S, block_k):
            rows, keys = range(a, min(a + block_q, T)), range(b, min(b + block_k, S))
            seen = 0
            for i in rows:
                p = S - T + i
                lo = 0 if window is None else max(0, p - window + 1)
                seen += max(0, min(p, keys[-1]) - max(lo, keys[0]) + 1)
            row.append(SKIP if seen == 0 else FULL if seen == len(rows) * len(keys) else PARTIAL)
        grid.append(row)
    return np.array(grid)


def random_case(rng, window):
    S = int(rng.integers(1, 70))
    T = int(rng.integers(1, S + 1))
    W = None if not window else int(rng.integers(1, S + 10))
    return T, S, int(rng.integers(1, 12)), int(rng.integers(1, 12)), W


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("window", [False, True])
def test_oracle_matches_the_counted_rule_on_random_shapes(seed, window):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        case = random_case(rng, window)
        np.testing.assert_array_equal(oracle.classify_tiles(*case), counted(*case), err_msg=str(case))


@pytest.mark.parametrize("seed", range(3))
def test_closed_form_used_for_diagnoses_matches_the_oracle(seed):
    rng = np.random.default_rng(100 + seed)
    for _ in range(40):
        case = random_case(rng, window=bool(rng.integers(2)))
        np.testing.assert_array_equal(diagnosis.right(*case), oracle.classify_tiles(*case), err_msg=str(case))


def test_single_tiles_agree_with_the_whole_grid():
    T, S, block_q, block_k, W = 45, 67, 8, 16, 20
    grid = oracle.classify_tiles(T, S, block_q, block_k, W)
    for a in range(grid.shape[0]):
        for b in range(grid.shape[1]):
            assert oracle.classify_tile(T, S, block_q, block_k, a, b, W) == grid[a, b]


def test_seed_tile_rules_hold_without_a_window():
    # A key tile starting after the query tile's last position is skipped; one ending at or
    # before its first position is fully visible; only the tiles in between are partial.
    rng = np.random.default_rng(7)
    for _ in range(30):
        T, S, block_q, block_k, _ = random_case(rng, window=False)
        grid = oracle.classify_tiles(T, S, block_q, block_k)
        for a in range(grid.shape[0]):
            q_first, q_last = S - T + a * block_q, S - T + min((a + 1) * block_q, T) - 1
            for b in range(grid.shape[1]):
                k_first, k_last = b * block_k, min((b + 1) * block_k, S) - 1
                if k_first > q_last:
                    assert grid[a, b] == SKIP
                elif k_last <= q_first:
                    assert grid[a, b] == FULL
                else:
                    assert grid[a, b] == PARTIAL


def test_decode_puts_the_diagonal_at_the_right_edge():
    assert (oracle.classify_tiles(1, 4099, 1, 128) == FULL).all()  # one query sees everything
    # speculative verification, T = 4 over S = 4,096: the 6 masked pairs are all in the last key tile
    grid = oracle.classify_tiles(4, 4096, 4, 128)
    assert grid.shape == (1, 32)
    assert (grid[0, :-1] == FULL).all() and grid[0, -1] == PARTIAL


def test_window_counts_itself():
    # W = 1: each query sees only its own key; W >= S: the same as no window
    assert (oracle.element_mask(5, 9, range(5), range(9), 1) == np.eye(5, 9, k=4, dtype=bool)).all()
    np.testing.assert_array_equal(oracle.classify_tiles(7, 30, 3, 4, 30), oracle.classify_tiles(7, 30, 3, 4))
    # W = 3: the query at position 5 sees keys 3, 4, 5 (the prompt's example)
    assert oracle.element_mask(1, 6, range(1), range(6), 3).tolist() == [[False] * 3 + [True] * 3]


def test_prompt_worked_example():
    assert oracle.classify_tiles(6, 6, 2, 3).tolist() == [[1, 0], [2, 1], [2, 1]]


# Cases to try each known mistake on: decode, chunks, prefill, ragged tiles and windows.
CASES = [(5, 37, 4, 8, None), (20, 45, 4, 6, None), (9, 17, 4, 6, None), (6, 16, 3, 5, None),
         (6, 15, 3, 5, None), (1, 50, 1, 8, 3), (7, 40, 3, 5, 9), (13, 13, 5, 6, None),
         (4, 20, 1, 3, None), (6, 6, 5, 1, 3)]  # a ragged key tile a one-row query tile sees whole;
# a ragged query tile whose window still takes a whole key tile


EXTRA = [(15, 23, 7, 8, None)]  # ragged tiles that only the ragged mistake explains


def _named(case, grid):
    return [i for i, _ in diagnosis.explain_grids([(case, grid)]).named]


def test_every_variant_is_named_and_the_right_answer_is_not():
    for case in CASES:
        assert np.array_equal(diagnosis.right(*case), oracle.classify_tiles(*case))
    for variant in (v for v in diagnosis.VARIANTS if v.id != "over_masked_tiles"):  # a predicate: below
        differing = [case for case in CASES if variant.build(case) is not None
                     and not np.array_equal(variant.build(case), oracle.classify_tiles(*case))]
        assert differing, f"no case shows {variant.id}"
        for case in differing:  # this mistake, with any other that gives the very same grid here
            assert variant.id in _named(case, variant.build(case)), (variant.id, case)
        shown = differing + [c for c in EXTRA if variant.build(c) is not None
                             and not np.array_equal(variant.build(c), oracle.classify_tiles(*c))]
        together = diagnosis.explain_grids([(case, variant.build(case)) for case in shown])
        assert variant.id in dict(together.named), variant.id


def test_two_mistakes_that_give_the_same_grid_are_both_named():
    """attention-gym's causal block mask (q_idx >= kv_idx on block indices) is both at once."""
    case = (1, 50, 1, 8, 3)  # top-left and tile-index diagonals coincide for this single decode query
    found = diagnosis.explain_grids([(case, diagnosis._top_left(*case))])
    assert [i for i, _ in found.named] == ["top_left_alignment", "tile_index_diagonal"]


def test_an_unclamped_last_query_tile_is_named_for_that_edge_and_never_as_a_diagonal_slip():
    """Only the query edge left unclamped: a case it got right (a ragged key tile that a one-row query
    tile sees whole) refutes the both-edges variant, and the sentence asks to clamp to T only."""
    def query_unclamped(case):
        return diagnosis._ragged_as_full(False, True)(*case)
    cases = [(6, 6, 5, 1, 3), (1, 97, 4, 10, 9), (6, 102, 24, 24, 46), (4, 20, 1, 3, None), (8, 30, 4, 7, None)]
    right = {c: np.array_equal(query_unclamped(c), oracle.classify_tiles(*c)) for c in cases}
    failures = [(c, query_unclamped(c)) for c in cases if not right[c]]
    passes = [c for c in cases if right[c]]
    assert len(failures) == 3 and len(passes) == 2
    named = dict(diagnosis.explain_grids(failures, passes).named)
    assert "diagonal_bound_off_by_one" not in named
    assert named["ragged_tiles_as_full_size"].endswith("clamp tile ends to T")
    assert "the last query tile holds 1 of 5 rows" in named["ragged_tiles_as_full_size"]


def test_top_left_sentence_gives_concrete_figures():
    case = (9, 4096, 4, 128, None)
    [(_, sentence)] = diagnosis.explain_grids([(case, diagnosis._top_left(*case))]).named
    assert "sits at position 4,087" in sentence


def test_a_mistake_is_named_only_when_it_explains_every_failing_case():
    top_left = ((5, 37, 4, 8, None), diagnosis._top_left(5, 37, 4, 8, None))
    other = ((9, 17, 4, 6, None), np.zeros((3, 3), int))
    found = diagnosis.explain_grids([top_left, other])
    assert found.named == [] and found.hint.startswith("consistent with top left alignment")


def _conservative(case):
    """FlashAttention-2's schedule: the last two visible key tiles of every query tile are masked."""
    grid = oracle.classify_tiles(*case).copy()
    for row in grid:
        row[np.flatnonzero(row != oracle.SKIP)[-2:]] = oracle.PARTIAL
    return grid


def test_over_masking_is_named_for_what_it_is_and_never_as_a_swap():
    cases = [c for c in CASES if not np.array_equal(_conservative(c), oracle.classify_tiles(*c))]
    assert len(cases) >= 3
    found = diagnosis.explain_grids([(c, _conservative(c)) for c in cases])
    assert [i for i, _ in found.named] == ["over_masked_tiles"]
    skipped_a_visible_tile = oracle.classify_tiles(*cases[0]).copy()
    skipped_a_visible_tile[0, 0] = oracle.SKIP if skipped_a_visible_tile[0, 0] != oracle.SKIP else oracle.FULL
    assert "over_masked_tiles" not in dict(diagnosis.explain_grids([(cases[0], skipped_a_visible_tile)]).named)


def test_the_bounds_oracle_for_huge_sizes_agrees_with_the_element_mask_on_random_small_shapes():
    """check_huge_sizes judges sizes past 2^62 from the tiles' bounds; here that rule meets the
    brute-force element mask on 400 random shapes, windows included (seed recorded: 2026)."""
    rng = np.random.default_rng(2026)
    for _ in range(400):
        T = int(rng.integers(1, 12))
        S = T + int(rng.integers(0, 40))
        block_q, block_k = int(rng.integers(1, 9)), int(rng.integers(1, 13))
        window = None if rng.random() < 0.3 else int(rng.integers(1, S + 5))
        for a in range(oracle.tile_count(T, block_q)):
            for b in range(oracle.tile_count(S, block_k)):
                args = (T, S, block_q, block_k, a, b, window)
                assert oracle.classify_tile_by_bounds(*args) == oracle.classify_tile(*args), args
