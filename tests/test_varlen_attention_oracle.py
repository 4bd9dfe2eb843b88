"""The hidden oracle for varlen_attention agrees with small cases worked out by hand."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from grader.checking import odd_size_closed
from grader.hidden.varlen_attention import checks, diagnosis, oracle


def test_each_sequence_is_bottom_right_within_itself():
    # sequence 0: 2 queries over 5 keys, so they are its tokens 3 and 4;
    # sequence 1: 1 query over 2 keys (its token 1), packed at key rows 5 and 6
    expected = np.array([[1, 1, 1, 1, 0, 0, 0],
                         [1, 1, 1, 1, 1, 0, 0],
                         [0, 0, 0, 0, 0, 1, 1]], dtype=bool)
    np.testing.assert_array_equal(oracle.varlen_mask([0, 2, 3], [0, 5, 7]), expected)


def test_a_sequence_without_queries_keeps_its_keys():
    # sequence 0 owns key rows 0..2 and no query; row 0 is sequence 1's only query (token 1 of 2)
    np.testing.assert_array_equal(oracle.varlen_mask([0, 0, 1], [0, 3, 5]), [[0, 0, 0, 1, 1]])
    np.testing.assert_array_equal(oracle.varlen_mask([0, 0], [0, 4]), np.zeros((0, 4), bool))


def test_attention_averages_exactly_the_visible_values():
    q = np.zeros((2, 2))  # zero queries: equal scores, so the output is the mean of the visible values
    k = np.ones((3, 2))
    v = np.array([[1.0, 2.0], [3.0, 5.0], [7.0, 11.0]])
    out = oracle.varlen_attention(q, k, v, [0, 1, 2], [0, 1, 3])
    np.testing.assert_allclose(out, [[1.0, 2.0], [5.0, 8.0]])  # row 0: v[0]; row 1: mean of v[1], v[2]


def test_positions_skip_the_padding():
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    expected = [[-1, -1, 0, 1, 2], [0, 1, 2, 3, 4], [-1, -1, -1, -1, -1]]
    np.testing.assert_array_equal(oracle.left_padded_positions(mask), expected)


def test_decode_mask_hides_padding_and_the_future():
    mask = np.array([[0, 1, 1, 1], [1, 1, 1, 1]], dtype=bool)
    expected = np.array([[[0, 1, 1, 0], [0, 1, 1, 1]],
                         [[1, 1, 1, 0], [1, 1, 1, 1]]], dtype=bool)
    np.testing.assert_array_equal(oracle.left_padded_decode_mask(mask, 2), expected)


def test_masked_attention_agrees_with_the_per_sequence_oracle():
    rng = np.random.default_rng(3)
    for n_q, n_k in checks.mixed_batches(rng, 9):
        n_k = [max(k, 1) for k in n_k]
        batch = checks.Packed(n_q, n_k)
        q, k, v = checks._qkv(rng, batch, 5)
        np.testing.assert_allclose(oracle.masked_attention(q, k, v, oracle.varlen_mask(*batch.inputs)),
                                   oracle.varlen_attention(q, k, v, *batch.inputs), atol=1e-12)


def test_one_offset_is_right_only_when_every_offset_agrees():
    prefills = checks.Packed([3, 5, 2], [3, 5, 2]).inputs
    uneven = checks.Packed([1, 4, 0, 2], [6, 4, 3, 9]).inputs
    for variant in diagnosis.MASK_VARIANTS[:3]:  # the three global_offset variants
        assert variant.id == "global_offset"
        right = oracle.varlen_mask(*prefills)
        np.testing.assert_array_equal(variant.build(diagnosis.Case(prefills, right)), right)
        assert not np.array_equal(variant.build(diagnosis.Case(uneven, None)), oracle.varlen_mask(*uneven))


def test_every_variant_differs_from_the_oracle_somewhere_in_the_checks_batches():
    rng = np.random.default_rng(0)
    batches = [checks.Packed(*counts).inputs for counts in checks.mixed_batches(rng, 27)]
    for variant in diagnosis.MASK_VARIANTS:
        assert any(not np.array_equal(variant.build(diagnosis.Case(b, None)), oracle.varlen_mask(*b)) for b in batches)


def test_drawn_batches_cover_every_kind_and_size():
    rng = np.random.default_rng(1)
    batches = checks.mixed_batches(rng, 27)
    assert {len(n_q) for n_q, _ in batches} == set(range(1, 10))
    pairs = [(q, k) for n_q, n_k in batches for q, k in zip(n_q, n_k)]
    assert any(q == 0 for q, _ in pairs) and any(q == k for q, k in pairs) and any(0 < q < k for q, k in pairs)
    assert all(q <= k for q, k in pairs)


def _load(path):
    spec = importlib.util.spec_from_file_location(f"mutant_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MUTANTS = Path(__file__).resolve().parent.parent / "solutions" / "mutants" / "varlen_attention"


def _explained(variants, inputs, right, got):
    """(named ids, hint) of one failing case."""
    found = diagnosis.explain_failures(variants, [(diagnosis.Case(inputs, right), got)])
    return [i for i, _ in found.named], found.hint


@pytest.mark.parametrize("name", ["global_offset", "first_sequence_offset", "earlier_sequences_visible",
                                  "empty_sequence_lookup", "packed_causal", "top_left"])
def test_mask_mutants_are_explained_by_their_diagnosis_on_every_seed(name):
    """On the mask checks' batches for seeds 0-20, every case a mutant gets wrong is explained by
    its own diagnosis (the mechanism behind stable names, not the seeds chosen): it is always named,
    beside any other mistake that explains the case as well (where the first sequence is a prefill,
    its offset is 0 and one offset for every sequence is the top-left mask: both are named)."""
    mutant = _load(MUTANTS / f"{name}.py")
    wrong_cases = 0
    for seed in range(21):
        rng = np.random.default_rng(seed)
        for n_q, n_k in checks.mixed_batches(rng, 27):
            inputs = checks.Packed(n_q, n_k).inputs
            got, want = mutant.varlen_mask(*inputs), oracle.varlen_mask(*inputs)
            if np.array_equal(got, want):
                continue
            wrong_cases += 1
            named, hint = _explained(diagnosis.MASK_VARIANTS, inputs, want, got)
            expected = mutant.EXPECTED_DIAGNOSIS
            assert expected in named, (seed, n_q, n_k, named, hint)
    assert wrong_cases > 0


@pytest.mark.parametrize("name", ["positions_count_padding", "query_columns_as_positions", "padding_visible"])
def test_padding_mutants_are_explained_by_their_diagnosis_on_every_seed(name):
    mutant = _load(MUTANTS / f"{name}.py")
    wrong_cases = 0
    for seed in range(21):
        rng = np.random.default_rng(seed)
        B, S = odd_size_closed(rng, 2, 7), odd_size_closed(rng, 6, 70)
        T = int(rng.integers(1, S // 2))
        mask = checks.padded([min(p, S - T) for p in checks._pads(rng, B, S)], S)
        for answer, rule, variants, inputs in [
                (mutant.left_padded_positions(mask), oracle.left_padded_positions(mask),
                 diagnosis.POSITION_VARIANTS, (mask, None)),
                (mutant.left_padded_decode_mask(mask, T), oracle.left_padded_decode_mask(mask, T),
                 diagnosis.DECODE_MASK_VARIANTS, (mask, T))]:
            if np.array_equal(answer, rule):
                continue
            wrong_cases += 1
            assert _explained(variants, inputs, rule, answer)[0] == [mutant.EXPECTED_DIAGNOSIS], seed
    assert wrong_cases > 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unseen_far_above_scores_stay_in_range_and_put_every_unseen_key_above(dtype):
    # the draw that catches a finite stand-in for exclusion must itself stay inside section 1:
    # scaled scores in [-1e4, 1e4], every key a query may see far below every key it may not see
    rng = np.random.default_rng(3)
    batch = checks.Packed(*checks.counts(rng, ["chunk", "idle", "decode", "prefill"]), "list")
    q, k, v = checks._unseen_far_above(dtype)(rng, batch)
    scores = q.astype(np.float64) @ k.astype(np.float64).T / np.sqrt(q.shape[1])
    seen = oracle.varlen_mask(*batch.inputs)
    assert np.abs(scores).max() <= 1e4
    assert scores[seen].max() < -9_990 and scores[~seen].min() > 9_990
    # an additive -1e4 bias on the unseen keys lets them take the row over: the oracle must not agree
    biased = np.where(seen, scores, scores - 1e4)
    weights = np.exp(biased - biased.max(axis=1, keepdims=True))
    leaked = weights / weights.sum(axis=1, keepdims=True) @ v.astype(np.float64)
    assert not np.allclose(leaked, oracle.varlen_attention(q, k, v, *batch.inputs), atol=1e-3)


def test_a_batch_without_any_query_is_valid_and_empty():
    # every sequence sits out (total_q = 0): the contract's conditions hold, so the answer is [0, D]
    for cu_q, cu_k in checks.ALL_IDLE:
        batch = checks.Packed(cu_q, cu_k)
        total_k = int(batch.cu_k[-1])
        assert oracle.varlen_mask(*batch.inputs).shape == (0, total_k)
        out = oracle.varlen_attention(np.zeros((0, 5)), np.ones((total_k, 5)), np.ones((total_k, 5)), *batch.inputs)
        assert out.shape == (0, 5)
    module = _load(MUTANTS.parent.parent / "varlen_attention.py")  # the reference
    assert module.varlen_attention(np.zeros((0, 3)), np.ones((9, 3)), np.ones((9, 3)), [0, 0, 0], [0, 6, 9]).shape \
        == (0, 3)
