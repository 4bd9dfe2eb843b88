"""The hidden oracle for fused_attention agrees with an independent statement of the rule."""
import numpy as np
import pytest

from grader.checking import CheckFailure
from grader.hidden.fused_attention import checks, diagnosis, oracle
from grader.hidden.fused_attention.kv_source import KVSource


def dense_rule(q_pos, k_pos, window):
    # Stated differently on purpose: the distance p - k must lie in [0, W), on filled slots.
    distance = np.asarray(q_pos)[:, None] - np.asarray(k_pos)[None, :]
    limit = np.inf if window is None else window
    return (np.asarray(k_pos)[None, :] != -1) & (distance >= 0) & (distance < limit)


def dense_attention(q, k, v, mask):
    s = np.where(mask, q @ k.T / np.sqrt(q.shape[1]), -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.logaddexp.reduce(s, axis=1)
        w = np.exp(s - lse[:, None])
    w = np.nan_to_num(w)
    return w @ v, lse


def random_case(rng):
    S, T, D = int(rng.integers(1, 80)), int(rng.integers(1, 12)), int(rng.integers(1, 9))
    if rng.random() < 0.5:
        k_pos = oracle.ring_positions(S, int(rng.integers(0, 3 * S)))
        k_pos[rng.random(S) < 0.2] = -1
    else:
        k_pos = np.arange(S)
    q_pos = rng.integers(0, 3 * S + 1, size=T)
    window = None if rng.random() < 0.4 else int(rng.integers(1, S + 5))
    return rng.standard_normal((T, D)), rng.standard_normal((S, D)), rng.standard_normal((S, D)), q_pos, k_pos, window


@pytest.mark.parametrize("seed", range(4))
def test_attention_matches_the_dense_rule(seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        q, k, v, q_pos, k_pos, window = random_case(rng)
        mask = dense_rule(q_pos, k_pos, window)
        o, lse = oracle.attention(q, k, v, q_pos, k_pos, window)
        want_o, want_lse = dense_attention(q, k, v, mask)
        np.testing.assert_allclose(o, want_o, atol=1e-12)
        np.testing.assert_array_equal(np.isneginf(lse), ~mask.any(axis=1))
        np.testing.assert_allclose(lse[mask.any(axis=1)], want_lse[mask.any(axis=1)], atol=1e-12)
        assert not np.isnan(o).any() and (o[~mask.any(axis=1)] == 0).all()


@pytest.mark.parametrize("seed", range(3))
def test_visible_tiles_match_blocks_of_the_dense_rule(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        _, _, _, q_pos, k_pos, window = random_case(rng)
        bq, bk = int(rng.integers(1, 6)), int(rng.integers(1, 20))
        mask = dense_rule(q_pos, k_pos, window)
        tiles = oracle.visible_tiles(q_pos, k_pos, window, bq, bk)
        for a in range(tiles.shape[0]):
            for b in range(tiles.shape[1]):
                assert tiles[a, b] == mask[a * bq:(a + 1) * bq, b * bk:(b + 1) * bk].any()


def test_ring_positions_keep_the_last_token_of_each_slot():
    for capacity, written in [(5, 0), (5, 3), (5, 5), (5, 13), (7, 100)]:
        slots = np.arange(capacity)
        last = slots + capacity * ((written - 1 - slots) // capacity)  # largest t < written, t % C == s
        np.testing.assert_array_equal(oracle.ring_positions(capacity, written),
                                      np.where(slots < written, last, -1))


def test_speculative_verify_figures_from_the_seed():
    # T = 4 over S = 4,096: 6 masked entries, and every tile of 64 x 128 must be loaded
    q_pos, k_pos = np.arange(4092, 4096), np.arange(4096)
    seen = np.array([oracle.visible_keys(p, k_pos) for p in q_pos])
    assert (~seen).sum() == 6
    assert oracle.visible_tiles(q_pos, k_pos, None, 64, 128).all()


def test_windowed_decode_needs_only_the_last_tiles():
    k_pos = np.arange(1000)
    tiles = oracle.visible_tiles(np.array([999]), k_pos, 100, 64, 128)
    assert np.flatnonzero(tiles[0]).tolist() == [7]  # keys 900..999 lie in tile 7 (896..1000)


def test_kv_source_counts_loads_and_refuses_bad_ranges():
    k = np.arange(20.0).reshape(10, 2)
    source = KVSource(k, -k, np.arange(10))
    got_k, got_v = source.load(2, 5)
    np.testing.assert_array_equal(got_k, k[2:5])
    np.testing.assert_array_equal(got_v, -k[2:5])
    source.load(np.int64(4), 6)
    assert source.times_loaded().tolist() == [0, 0, 1, 1, 2, 1, 0, 0, 0, 0]
    for start, stop in [(3, 3), (-1, 2), (5, 11), (1.0, 3), (True, 3)]:
        with pytest.raises(ValueError):
            source.load(start, stop)
    assert len(source.loads) == 2


def _case(**kw):
    rng = np.random.default_rng(3)
    return checks.ring(rng, 40, 130, 6, 4, "ring", **kw) if kw.pop("ring", False) else \
        checks.contiguous(rng, 6, 40, 4, "contiguous", **kw)


@pytest.mark.parametrize("diagnosis_id, variant_index, case", [
    ("slot_index_positions", 0, dict(ring=True)),
    ("top_left_alignment", 1, dict()),
    ("window_off_by_one", 2, dict(window=7)),
    ("window_off_by_one", 3, dict(window=7)),
    ("window_ignored", 4, dict(window=7)),
    ("lse_unscaled", 5, dict()),
])
def test_each_variant_is_named_and_the_right_answer_is_not(diagnosis_id, variant_index, case):
    case = _case(**case)
    right = oracle.attention(case.q, case.k, case.v, case.q_pos, case.k_pos, case.window)
    assert diagnosis.explain_outputs([(case, right)]).named == []
    wrong = diagnosis.VARIANTS[variant_index].build(case)
    assert [i for i, _ in diagnosis.explain_outputs([(case, wrong)]).named] == [diagnosis_id]


def test_empty_slots_let_through_on_a_ring_not_yet_full_are_not_called_slot_indices():
    """There the filled slots hold their own index, so slot indices differ from positions only on the
    empty slots: an answer that merely lets empty slots through (a boundary tile's mask without k >= 0)
    gives the same outputs, and naming slot indices would be a guess. A wrapped ring still names them."""
    rng = np.random.default_rng(5)
    fresh = checks.ring(rng, 60, 41, 5, 4, "ring, not yet full", holes=6)  # slot j holds j or -1 (j > 40, holes)
    seen = np.where(fresh.k_pos < 0, np.arange(60), fresh.k_pos)  # a hole seen where its slot would be
    empty_seen = oracle.attention(fresh.q, fresh.k, fresh.v, fresh.q_pos, seen, fresh.window)
    right = oracle.attention(fresh.q, fresh.k, fresh.v, fresh.q_pos, fresh.k_pos, fresh.window)
    assert not diagnosis.same(empty_seen[0], right[0], 1e-9)  # wrong, and the old variant fitted it exactly
    assert diagnosis.explain_outputs([(fresh, empty_seen)]).named == []
    wrapped = checks.ring(rng, 60, 130, 5, 4, "ring, wrapped")
    wrong = diagnosis.VARIANTS[0].build(wrapped)
    assert [i for i, _ in diagnosis.explain_outputs([(wrapped, wrong)]).named] == ["slot_index_positions"]


def test_nan_sentence_counts_the_rows_that_see_nothing():
    case = _case(window=1)
    case.k_pos[[35, 37]] = -1  # rows 1 and 3 see nothing
    o, lse = oracle.attention(case.q, case.k, case.v, case.q_pos, case.k_pos, case.window)
    o[1] = np.nan
    sentence = diagnosis.nan_sentence(case, o, lse)
    assert "1 of 6 rows" in sentence and "(1 of them" in sentence


def test_same_treats_infinities_and_nan_strictly():
    assert diagnosis.same(np.array([-np.inf, 1.0]), np.array([-np.inf, 1.0 + 1e-12]), 1e-9)
    assert not diagnosis.same(np.array([np.nan, 1.0]), np.array([-np.inf, 1.0]), 1e-9)
    assert not diagnosis.same(np.array([0.0, 1.0]), np.array([-np.inf, 1.0]), 1e-9)


class _Run:
    seed = 0

    def __init__(self):
        self.diagnoses = {}

    def diagnose(self, diagnosis_id, message):
        self.diagnoses[diagnosis_id] = message


def test_loads_of_a_contiguous_layout_on_a_ring_buffer_are_named():
    case = checks.ring(np.random.default_rng(0), 97, 1_000, 20, 4, "ring buffer", window=40, block_q=8, block_k=9)
    layout = oracle.visible_tiles(np.arange(77, 97), np.arange(97), 40, 8, 9)
    source = KVSource(case.k, case.v, case.k_pos)
    for _, b in np.argwhere(layout):
        source.load(int(b) * 9, min(int(b) * 9 + 9, 97))
    run = _Run()
    with pytest.raises(CheckFailure):
        checks._expect_loads(run, case, source)
    assert list(run.diagnoses) == ["contiguous_tiles_assumed"]


def test_exact_loads_pass_and_one_extra_tile_is_named():
    case = checks.ring(np.random.default_rng(1), 97, 1_000, 20, 4, "ring buffer", window=40, block_q=8, block_k=9)
    tiles = oracle.visible_tiles(case.q_pos, case.k_pos, 40, 8, 9)
    source = KVSource(case.k, case.v, case.k_pos)
    for _, b in np.argwhere(tiles):
        source.load(int(b) * 9, min(int(b) * 9 + 9, 97))
    checks._expect_loads(_Run(), case, source)  # exactly the visible tiles: no failure
    unseen = int(np.flatnonzero(~tiles.any(axis=0))[0]) * 9  # first key of a tile no query sees
    source.load(unseen, unseen + 1)
    run = _Run()
    with pytest.raises(CheckFailure):
        checks._expect_loads(run, case, source)
    assert list(run.diagnoses) == ["loads_skipped_tiles"]
