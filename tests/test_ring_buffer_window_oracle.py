"""The hidden oracle for ring_buffer_window agrees with independent statements of the rule, and
every known-wrong variant is recognised while the right answer is not."""
import numpy as np
import pytest

from grader.hidden.ring_buffer_window import diagnosis, oracle


def dense_window_attention(q, k, v, W):
    # Stated differently on purpose: a band of the full score matrix, FlashAttention-style
    # window_size=(W - 1, 0): key j is visible from row i when i - (W - 1) <= j <= i.
    N = q.shape[0]
    i, j = np.arange(N)[:, None], np.arange(N)[None, :]
    band = (j <= i) & (i - (W - 1) <= j)
    scores = np.where(band, q @ k.T / np.sqrt(q.shape[1]), -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True) @ v


def latest_position(slot, length, C):
    # The slot's last writer: the largest p < length with p = slot (mod C), found by counting laps.
    if slot >= length:
        return -1
    return slot + C * ((length - 1 - slot) // C)


@pytest.mark.parametrize("seed", range(4))
def test_window_mask_matches_set_membership(seed):
    rng = np.random.default_rng(seed)
    for _ in range(15):
        q = rng.integers(0, 90, int(rng.integers(1, 9)))
        k = np.concatenate([rng.permutation(90)[:int(rng.integers(1, 30))], [-1] * int(rng.integers(0, 4))])
        W = int(rng.integers(1, 40))
        expected = np.array([[int(kk) in range(max(0, int(p) - W + 1), int(p) + 1) for kk in k] for p in q])
        np.testing.assert_array_equal(oracle.window_mask(q, k, W), expected)
        np.testing.assert_array_equal(diagnosis.variant_mask(diagnosis.RIGHT, q, k, W), expected)


@pytest.mark.parametrize("seed", range(3))
def test_sliding_window_attention_matches_a_dense_band(seed):
    rng = np.random.default_rng(seed)
    N, D, W = int(rng.integers(40, 130)), int(rng.integers(2, 20)), int(rng.integers(1, 30))
    q, k, v = (rng.standard_normal((N, D)) for _ in range(3))
    np.testing.assert_allclose(oracle.sliding_window_attention(q, k, v, W),
                               dense_window_attention(q, k, v, W), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("C,length", [(1, 5), (4, 6), (7, 3), (13, 97), (45, 130)])
def test_ring_positions_match_the_lap_formula(C, length):
    ring = oracle.Ring(C, 2)
    rows = np.arange(2.0 * length).reshape(length, 2)
    ring.append(rows[: length // 2], -rows[: length // 2])
    ring.append(rows[length // 2:], -rows[length // 2:])
    expected = [latest_position(s, length, C) for s in range(C)]
    np.testing.assert_array_equal(ring.positions, expected)
    for slot, p in enumerate(expected):
        if p >= 0:
            np.testing.assert_array_equal(ring.keys[slot], rows[p])


def test_the_reversal_lower_bound_from_the_seed():
    # A window adds j > (S - T) + i - W to the decode mask j <= (S - T) + i.
    S, T, W = 37, 5, 6
    q = np.arange(S - T, S)
    expected = np.array([[S - T + i - W < j <= S - T + i for j in range(S)] for i in range(T)])
    np.testing.assert_array_equal(oracle.window_mask(q, np.arange(S), W), expected)
    assert oracle.window_mask(q, np.arange(S), W).sum(axis=1).tolist() == [W] * T


def test_worked_example_of_the_prompt():
    assert oracle.window_mask([5], [4, 5, 2, 3], 3).tolist() == [[True, True, False, True]]
    assert oracle.window_mask([1], [0, 1, -1, -1], 3).tolist() == [[True, True, False, False]]


def test_every_mask_variant_is_named_and_the_right_mask_is_not():
    C, length, W = 11, 40, 5
    ring = oracle.Ring(C, 1)
    ring.append(np.zeros((length, 1)), np.zeros((length, 1)))
    q = np.arange(length - 3, length)
    early = oracle.Ring(C, 1)
    early.append(np.zeros((3, 1)), np.zeros((3, 1)))
    cases = [(q, ring.positions), (np.arange(1, 3), early.positions)]
    right = [(oracle.window_mask(qq, kk, W), qq, kk, W) for qq, kk in cases]
    assert diagnosis.diagnose_masks(right) == []
    for variant in [v for v in diagnosis.mask_variants() if len(v.atoms) == 1]:
        wrong = [(diagnosis.variant_mask(variant.mistakes, qq, kk, W), qq, kk, W) for qq, kk in cases]
        wrong = [w for w, r in zip(wrong, right) if not np.array_equal(w[0], r[0])]  # as checks pass them
        assert [i for i, _ in diagnosis.diagnose_masks(wrong)] == variant.ids, variant.atoms


def _stream(seed, C, W, chunks, D=6):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((sum(chunks), D)) for _ in range(3))
    return q, k, v


def _split(out, chunks):
    return np.split(out, np.cumsum(chunks)[:-1])


def test_right_stream_is_the_oracle_and_draws_no_diagnosis():
    C, W, chunks = 9, 9, [5, 1, 7, 1, 1, 9, 3] * 6
    q, k, v = _stream(0, C, W, chunks)
    right = diagnosis.Combination((), diagnosis.RIGHT)
    out, example = diagnosis.replay([right], C, W, q, k, v, chunks)[right]
    np.testing.assert_allclose(out, oracle.sliding_window_attention(q, k, v, W), atol=1e-12)
    assert example is None
    assert diagnosis.diagnose_stream(_split(out, chunks), C, W, q, k, v, chunks) == ([], None)


@pytest.mark.parametrize("name", [a[0] for a in diagnosis.ATOMS])
def test_every_single_step_mistake_is_named(name):
    # capacity 13, window 9: chunks up to 13 overwrite needed keys; the ring wraps; early
    # queries meet empty slots.
    C, W = 13, 9
    chunks = [1, 6, 1, 1, 12, 2, 13, 1, 5, 1, 1, 1, 8, 3, 11]
    q, k, v = _stream(1, C, W, chunks)
    variant = next(v_ for v_ in diagnosis.step_variants() if v_.atoms == (name,))
    out, example = diagnosis.replay([variant], C, W, q, k, v, chunks)[variant]
    assert example is not None
    found, _ = diagnosis.diagnose_stream(_split(out, chunks), C, W, q, k, v, chunks)
    assert [i for i, _ in found] == variant.ids


def test_appending_first_is_harmless_for_plain_decode():
    # Why T = 1 hides the bug: the ring still holds the last capacity >= W positions.
    C, W, chunks = 7, 7, [1] * 40
    q, k, v = _stream(2, C, W, chunks)
    first = next(v_ for v_ in diagnosis.step_variants() if v_.atoms == ("append_first",))
    out, example = diagnosis.replay([first], C, W, q, k, v, chunks)[first]
    assert example is None
    np.testing.assert_allclose(out, oracle.sliding_window_attention(q, k, v, W), atol=1e-12)


def test_equivalent_mistakes_are_not_named():
    # With T = 1 a window of W - 1 and queries placed after the append give the same outputs.
    C, W, chunks = 10, 6, [1] * 30
    q, k, v = _stream(3, C, W, chunks)
    minus = next(v_ for v_ in diagnosis.step_variants() if v_.atoms == ("window_minus_one",))
    out, _ = diagnosis.replay([minus], C, W, q, k, v, chunks)[minus]
    assert diagnosis.diagnose_stream(_split(out, chunks), C, W, q, k, v, chunks) == ([], None)


def test_sentences_quote_the_case():
    wide = diagnosis.variant_mask(diagnosis.Mistakes(window_delta=1), [20], np.arange(21), 4)
    found = diagnosis.diagnose_masks([(wide, [20], np.arange(21), 4)])
    (diagnosis_id, sentence), = found
    assert diagnosis_id == "window_off_by_one"
    assert "5 keys (positions 16..20)" in sentence and "4 keys (positions 17..20)" in sentence
    assert "window_size=(3, 0)" in sentence


def _combination(*atoms):
    return next(v_ for v_ in diagnosis.step_variants() if v_.atoms == atoms)


def _as_submitted(combination, C, W, chunks, seed):
    q, k, v = _stream(seed, C, W, chunks)
    out, _ = diagnosis.replay([combination], C, W, q, k, v, chunks)[combination]
    return (_split(out, chunks), C, W, q, k, v, chunks)


def test_streams_are_judged_together_different_mistakes_name_none():
    C, W = 13, 9
    chunks = [1, 6, 1, 1, 12, 2, 13, 1, 5, 1, 1, 1, 8, 3, 11]
    wide = _as_submitted(_combination("window_plus_one"), C, W, chunks, 4)
    open_ = _as_submitted(_combination("no_lower_bound"), C, W, chunks, 5)
    assert [i for i, _ in diagnosis.diagnose_streams([wide])[0]] == ["window_off_by_one"]
    assert [i for i, _ in diagnosis.diagnose_streams([open_])[0]] == ["window_ignored"]
    # one stream each: no single combination explains both, so neither is named
    assert diagnosis.diagnose_streams([wide, open_]) == ([], None, 0)


def test_a_pair_that_explains_every_stream_names_both():
    # T = 1 decode hides appending first (the ring keeps W + 1 <= C positions), so the first
    # stream shows the wide window alone; chunks that overwrite needed slots show both.
    C, W = 13, 9
    pair = _combination("window_plus_one", "append_first")
    decode = _as_submitted(pair, C, W, [1] * 40, 6)
    chunked = _as_submitted(pair, C, W, [1, 6, 1, 1, 12, 2, 13, 1, 5, 1, 1, 1, 8, 3, 11], 7)
    assert [i for i, _ in diagnosis.diagnose_streams([decode])[0]] == ["window_off_by_one"]
    found, example, quoted = diagnosis.diagnose_streams([decode, chunked])
    assert sorted(i for i, _ in found) == ["append_before_attend", "window_off_by_one"]
    assert quoted == 1 and example.chunk_len > 1  # quoted where appending first shows: a chunk


@pytest.mark.parametrize("seed", range(6))
def test_the_reuse_plan_lands_chunks_in_slot_order(seed):
    # keeps_its_own_copy: a prefill of exactly the capacity first, then chunks ending exactly at a ring
    # boundary with T < C, C <= T < 2C and T >= 2C, through both a step and an append: where an answer
    # may take a chunk whole as its keys, and so keep the caller's array.
    from grader.hidden.ring_buffer_window.checks import _reuse_plan

    rng = np.random.default_rng(seed)
    for C in (1, 3, 7, 16):
        plan = _reuse_plan(rng, C)
        assert plan[0] == ("step", C)
        aligned, length = set(), 0
        for call, T in plan:
            length += T
            if length % C == 0:
                aligned.add((call, T >= C, T >= 2 * C))
        wanted = {("step", True, True), ("append", True, True), ("step", True, False), ("append", True, False)}
        if C > 1:
            wanted |= {("step", False, False), ("append", False, False)}
        assert wanted <= aligned, (C, plan)
