"""The hidden oracle for split_kv_decode agrees with small cases worked out by hand, and the
known-wrong variants are recognised while the right answer is not."""
import math

import numpy as np

from grader.hidden.split_kv_decode import checks, diagnosis, oracle

E = math.e
TOL = diagnosis.Tol(1e-12, 1e-12)


def test_one_query_over_three_keys_as_in_the_prompt():
    # D = 1, q = 1: the scores are the keys 0, 1, 2, so the weights are 1, e, e^2.
    o, lse = oracle.masked_attention(np.array([[1.0]]), np.array([[0.0], [1.0], [2.0]]),
                                     np.array([[1.0], [2.0], [3.0]]), np.ones((1, 3), bool))
    assert math.isclose(o[0, 0], (1 + 2 * E + 3 * E ** 2) / (1 + E + E ** 2))
    assert math.isclose(lse[0], math.log(1 + E + E ** 2))


def test_scores_are_scaled_by_the_root_of_d():
    # D = 4, q = k = (1, 1, 1, 1): the dot product is 4, the scaled score 4 / 2 = 2; one key: lse = 2.
    o, lse = oracle.masked_attention(np.ones((1, 4)), np.ones((1, 4)), np.full((1, 4), 7.0), np.ones((1, 1), bool))
    assert lse[0] == 2.0 and np.array_equal(o, np.full((1, 4), 7.0))


def test_a_row_that_sees_nothing_is_zero_with_minus_infinity():
    o, lse = oracle.masked_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 3)),
                                     np.array([[False] * 4, [True, False, False, False]]))
    assert np.array_equal(o[0], np.zeros(3)) and lse[0] == -math.inf
    assert np.array_equal(o[1], np.ones(3)) and math.isclose(lse[1], math.sqrt(3))  # one key, score 3 / sqrt(3)


def test_visibility_by_position_with_empty_slots():
    # keys stored at positions 4, (empty), 6, 2, 5; queries at positions 5 and 2.
    got = oracle.visible([5, 2], [4, -1, 6, 2, 5])
    assert got.tolist() == [[True, False, False, True, True], [False, False, False, True, False]]


def test_ranges_longer_first_and_empty_last():
    assert oracle.ranges(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert oracle.ranges(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert oracle.ranges(12, 3) == [(0, 4), (4, 8), (8, 12)]
    assert oracle.ranges(0, 3) == [(0, 0)] * 3
    assert oracle.ranges(7, 1) == [(0, 7)]


def test_queries_are_the_last_tokens_of_their_sequence():
    q_pos, k_pos = oracle.sequence_positions(P=3, L=4, T=2)
    assert q_pos.tolist() == [5, 6] and k_pos.tolist() == list(range(7))


def test_shared_prefix_sees_the_prefix_and_its_own_suffix_causally():
    # Every score is 0, so each query averages the values it sees. Prefix value 1; suffix values 2, 4.
    # Query 0 (the suffix's first token) sees the prefix and itself: (1 + 2) / 2. Query 1 sees all: 7 / 3.
    q = np.ones((1, 2, 1))
    out = oracle.shared_prefix(q, np.zeros((1, 1)), np.ones((1, 1)), np.zeros((1, 2, 1)), np.array([[[2.0], [4.0]]]))
    assert np.allclose(out[0, :, 0], [1.5, 7 / 3])


def test_shared_prefix_with_no_prefix_is_each_sequences_own_attention():
    out = oracle.shared_prefix(np.ones((2, 1, 1)), np.zeros((0, 1)), np.zeros((0, 1)), np.zeros((2, 2, 1)),
                               np.array([[[2.0], [4.0]], [[6.0], [8.0]]]))
    assert np.allclose(out[:, 0, 0], [3.0, 7.0])


def _three_parts():
    # Part weights 3, 1, 9 (lse log 3, 0, log 9), outputs 1, 2, 6: the merge is
    # (3 * 1 + 1 * 2 + 9 * 6) / 13 = 59 / 13, lse log 13; the plain mean is 3.
    o, lse = np.array([[[1.0]], [[2.0]], [[6.0]]]), np.array([[math.log(3)], [0.0], [math.log(9)]])
    return o, lse, (np.array([[59 / 13]]), np.array([math.log(13)]))


def test_the_right_merge_is_named_nothing():
    o, lse, want = _three_parts()
    assert diagnosis.explaining_merge(want, o, lse, want, TOL) == []


def test_averaging_is_recognised():
    o, lse, want = _three_parts()
    found = diagnosis.explaining_merge((np.array([[3.0]]), want[1]), o, lse, want, TOL)
    assert [i for i, _ in found] == ["averaged_outputs"]


def test_a_running_merge_without_rescaling_is_wrong_only_when_the_maximum_grows():
    o, lse, want = _three_parts()
    # In order: max log 3, acc 1, l 1; part 2 weighs 1/3: acc 5/3, l 4/3; part 3 raises the max to
    # log 9 and weighs 1, the past is not rescaled: acc 23/3, l 7/3, so 23/7.
    assert np.allclose(diagnosis.merge_stale_max(o, lse)[0], [[23 / 7]])
    assert [i for i, _ in diagnosis.explaining_merge((np.array([[23 / 7]]), None), o, lse, want, TOL)] == \
        ["merge_without_rescale"]
    # Heaviest first the maximum never grows, and the running merge is right.
    assert np.allclose(diagnosis.merge_stale_max(o[::-1], lse[::-1])[0], want[0])


def test_raw_exponentials_break_at_large_lse():
    o, lse = np.ones((2, 1, 1)), np.array([[1e4], [1e4 + 1]])
    got_o, got_lse = diagnosis.merge_raw_exp(o, lse)
    assert not np.isfinite(got_o).all() and got_lse[0] == math.inf


def test_floor_ranges_drop_the_tail_and_are_named():
    assert diagnosis.floor_ranges(10, 3) == [(0, 3), (3, 6), (6, 9)]
    assert [i for i, _ in diagnosis.explaining_ranges([(0, 3), (3, 6), (6, 9)], 10, 3)] == ["uneven_split_drops_keys"]
    assert diagnosis.explaining_ranges(oracle.ranges(10, 3), 10, 3) == []


def test_valid_covers_of_other_sizes_are_conventions_named_for_what_they_follow():
    assert not oracle.is_cover([(0, 3), (3, 6), (6, 9)], 10, 3)  # the tail is lost: a wrong cover
    assert not oracle.is_cover([(0, 4), (4, 10)], 10, 3)  # two ranges where three were asked
    assert not oracle.is_cover([(0, 4), (5, 7), (7, 10)], 10, 3)  # a gap
    remainder, flash = [(0, 3), (3, 6), (6, 10)], [(0, 4), (4, 8), (8, 10)]
    assert oracle.is_cover(remainder, 10, 3) and oracle.is_cover(flash, 10, 3)
    assert [i for i, _ in diagnosis.naming_convention(remainder, 10, 3)] == ["remainder_in_last_split",
                                                                              "other_split_sizes"]  # [3, 3, 4]: both
    assert [i for i, _ in diagnosis.naming_convention([(0, 3), (3, 6), (6, 11)], 11, 3)] == ["remainder_in_last_split"]
    longer_last = dict(diagnosis.naming_convention([(0, 3), (3, 7), (7, 11)], 11, 3))
    assert longer_last == {"other_split_sizes": "split_ranges(11, 3) keeps sizes within one but puts the 2 longer "
                                                "ranges last rather than first"}
    assert [i for i, _ in diagnosis.naming_convention(flash, 10, 3)] == ["ceil_split_sizes"]
    assert diagnosis.ceil_ranges(5, 4) == [(0, 2), (2, 4), (4, 5), (5, 5)]  # later splits may be empty
    assert [i for i, _ in diagnosis.naming_convention([(0, 1), (1, 5), (5, 10)], 10, 3)] == ["other_split_sizes"]


def test_plus_infinity_is_not_close_to_minus_infinity():
    assert not diagnosis.close(np.inf, -np.inf, 1e-8)
    assert diagnosis.close(-np.inf, -np.inf, 1e-8)


def test_a_ring_buffer_holds_the_newest_tokens_in_their_slots():
    # 7 tokens in 5 slots: tokens 2..6 in slots 2, 3, 4, 0, 1.
    kv = checks._ring(np.random.default_rng(0), T=2, capacity=5, written=7, D=3, holes=0)
    assert kv.k_pos.tolist() == [5, 6, 2, 3, 4] and kv.q_pos.tolist() == [5, 6]


def test_merge_overflow_is_named_where_rows_break_as_raw_exponentials_break_them_only():
    o = np.stack([np.full((2, 3), 1.0), np.full((2, 3), 3.0)])
    lse = np.array([[1e4, -1e4], [1e4 + 1, -1e4 + 2]])
    w = np.exp(lse - lse.max(axis=0))
    want = ((w[..., None] * o).sum(axis=0) / w.sum(axis=0)[:, None], lse.max(axis=0) + np.log(w.sum(axis=0)))
    tol = diagnosis.Tol.of((o, lse), want)
    raw = diagnosis.merge_raw_exp(o, lse)
    assert "merge_overflow" in [i for i, _ in diagnosis.explaining_merge(raw, o, lse, want, tol)]
    rounded = (want[0] * (1 + 1e-6), want[1])  # off everywhere, as a float32 merge is, but finite
    assert "merge_overflow" not in [i for i, _ in diagnosis.explaining_merge(rounded, o, lse, want, tol)]


def test_queries_before_the_newest_keep_their_next_key_and_face_future_keys_in_front():
    # 13 tokens in 5 slots, queries end 2 before the newest: tokens 8..12 in slots 3, 4, 0, 1, 2;
    # queries 9, 10; their positions and the next one (11) are never holes.
    for seed in range(20):
        kv = checks._ring(np.random.default_rng(seed), T=2, capacity=5, written=13, D=3, holes=2, gap=2)
        assert kv.q_pos.tolist() == [9, 10]
        assert {9, 10, 11} <= set(kv.k_pos.tolist()) and (kv.k_pos < 0).sum() == 2
        assert (kv.k_pos < -1).any()  # "a negative key position marks an empty slot": not only -1
    full = checks._ring(np.random.default_rng(0), T=2, capacity=5, written=13, D=3, holes=0, gap=2)
    assert full.k_pos.tolist() == [10, 11, 12, 8, 9]  # slot 1 holds a key past every query, before slots 3, 4


def test_empty_slots_are_marked_by_any_negative_position_int64_min_included():
    marks = np.concatenate([checks._empty_marks(np.random.default_rng(seed), 40) for seed in range(5)])
    assert (marks < 0).all() and (marks == -1).any() and (marks == -2).any()
    assert (marks == np.iinfo(np.int64).min).any() and ((marks < -2) & (marks > np.iinfo(np.int64).min)).any()


def test_positions_read_as_float64_make_a_future_key_visible_past_2_to_53():
    # 8 consecutive queries past 2^53, each with its next position stored: float64 merges some pairs.
    kv = checks._ring(np.random.default_rng(1), T=8, capacity=45, written=2**53 + 3 * 45 + 20, D=3, holes=4, gap=5)
    exact = oracle.visible(kv.q_pos, kv.k_pos)
    rounded = (kv.k_pos >= 0)[None, :] & (kv.k_pos.astype(np.float64)[None, :] <= kv.q_pos.astype(np.float64)[:, None])
    assert (rounded & ~exact).any() and not (exact & ~rounded).any()


def test_a_scan_that_stops_at_the_first_future_split_drops_visible_keys_of_a_ring():
    # the queries among the oldest slots: slot 0 holds a key past every query, visible keys follow it.
    kv = checks._ring(np.random.default_rng(2), T=5, capacity=50, written=3 * 50 + 7, D=3, holes=4, gap=12)
    seen = oracle.visible(kv.q_pos, kv.k_pos)
    assert kv.k_pos[0] > kv.q_pos.max() and seen.any()
    cut = next(a for a, b in oracle.ranges(50, 7) if b > a and kv.k_pos[a] > kv.q_pos.max())
    assert seen[:, cut:].any()  # a scan that stops there loses them


def test_the_merge_oracle_of_the_in_place_check_equals_attention_over_all_keys():
    rng = np.random.default_rng(3)
    for N in (1, 3, 6):
        parts = checks._parts(rng, N, 4, 40, 5, 0, garbage=True)
        o, lse = oracle.merged(parts.o, parts.lse)
        assert np.allclose(o, parts.want[0], atol=1e-12) and np.array_equal(np.isinf(lse), np.isinf(parts.want[1]))
        assert np.allclose(lse[np.isfinite(lse)], parts.want[1][np.isfinite(lse)], atol=1e-12)

