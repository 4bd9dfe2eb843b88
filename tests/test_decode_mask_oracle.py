"""The hidden oracle for decode_mask agrees with an independent statement of the rule."""
import numpy as np
import pytest

from grader.hidden.decode_mask import diagnosis, oracle


def rule(T, S):
    # Stated differently on purpose: count how many keys each row may see.
    visible = [S - T + i + 1 for i in range(T)]
    return np.array([[j < n for j in range(S)] for n in visible])


@pytest.mark.parametrize("seed", range(5))
def test_oracle_matches_the_rule_on_random_shapes(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        S = int(rng.integers(1, 90))
        T = int(rng.integers(1, S + 1))
        np.testing.assert_array_equal(oracle.causal_mask(T, S), rule(T, S))


def test_speculative_verify_figure_from_the_seed():
    # T = 4 over S = 4,096: 3 + 2 + 1 + 0 = 6 of 16,384 entries are masked
    assert (~oracle.causal_mask(4, 4096)).sum() == 6


def test_top_left_error_is_large_on_a_non_square_step():
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((37, 16)) for _ in range(3))
    full = oracle.full_sequence_attention(q, k, v)[-5:]
    wrong = oracle.attention(q[-5:], k, v, np.tril(np.ones((5, 37), bool)))
    right = oracle.attention(q[-5:], k, v, oracle.causal_mask(5, 37))
    assert np.abs(right - full).max() < 1e-12
    assert np.abs(wrong - full).max() > 0.3


def test_each_variant_is_named_and_the_right_mask_is_not():
    case = (4, 11)
    assert np.array_equal(diagnosis.right(case), oracle.causal_mask(*case))
    for variant in diagnosis.VARIANTS:
        assert [i for i, _ in diagnosis.explain_masks([(case, variant.build(case))]).named] == [variant.id]


def test_top_left_sentence_gives_concrete_counts():
    [(_, sentence)] = diagnosis.explain_masks([((4, 4096), np.tril(np.ones((4, 4096), bool)))]).named
    assert "row 0 sees 1 key, not 4,093" in sentence


def test_a_mistake_is_named_only_when_it_explains_every_failing_case():
    top_left = ((4, 11), np.tril(np.ones((4, 11), bool)))
    unexplained = ((3, 9), np.zeros((3, 9), bool))
    found = diagnosis.explain_masks([top_left, unexplained])
    assert found.named == [] and "top left alignment" in found.hint


def test_two_mistakes_in_different_cases_are_both_named():
    top_left = ((4, 11), np.tril(np.ones((4, 11), bool)))
    everything = ((3, 9), np.ones((3, 9), bool))
    assert sorted(i for i, _ in diagnosis.explain_masks([top_left, everything]).named) == [
        "no_mask", "top_left_alignment"]
