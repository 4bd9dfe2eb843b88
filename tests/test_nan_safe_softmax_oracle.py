"""The hidden oracle for nan_safe_softmax agrees with an independent statement of the rule, and
every known-wrong variant is recognised while the right answer is not."""
import math
import warnings

import numpy as np
import pytest

from grader.hidden.nan_safe_softmax import checks, diagnosis, oracle


def lse_rule(values: np.ndarray) -> float:
    # Stated differently on purpose: a pairwise log-add reduction, no max, no fsum.
    return float(np.logaddexp.reduce(values)) if values.size else -math.inf


def softmax_rule(scores, mask):
    """exp(s - lse(allowed)) on allowed entries, 0 elsewhere, from the log-add formulation."""
    out = np.zeros(scores.shape)
    for index in np.ndindex(scores.shape[:-1]):
        allowed = np.flatnonzero(mask[index])
        if allowed.size:
            row = scores[index].astype(np.float64)
            out[index][allowed] = np.exp(row[allowed] - lse_rule(row[allowed]))
    return out


def attention_rule(q, k, v, mask):
    """Key by key: each allowed key's weight is exp(s - lse) of the row; a row with none is zero."""
    T, D = q.shape
    out, lse = np.zeros((T, v.shape[1])), np.full(T, -math.inf)
    for i in range(T):
        scores = np.array([float(np.dot(q[i].astype(np.float64), k[j].astype(np.float64))) / math.sqrt(D)
                           for j in range(k.shape[0]) if mask[i, j]])
        keys = [j for j in range(k.shape[0]) if mask[i, j]]
        lse[i] = lse_rule(scores)
        for s, j in zip(scores, keys):
            out[i] += math.exp(s - lse[i]) * v[j].astype(np.float64)
    return out, lse


@pytest.mark.parametrize("seed", range(4))
def test_softmax_matches_the_rule_on_random_shapes(seed):
    rng = np.random.default_rng(seed)
    for _ in range(8):
        shape = tuple(int(x) for x in rng.integers(1, 12, int(rng.integers(1, 4))))
        scores = rng.standard_normal(shape) * rng.choice([0.1, 3.0, 50.0])
        mask = rng.random(shape) < rng.uniform(0.0, 1.0)
        np.testing.assert_allclose(oracle.masked_softmax(scores, mask), softmax_rule(scores, mask), atol=1e-13)


@pytest.mark.parametrize("seed", range(4))
def test_attention_matches_the_rule_on_random_shapes(seed):
    rng = np.random.default_rng(100 + seed)
    for dtype in (np.float32, np.float64):
        T, n, D = (int(x) for x in rng.integers(1, 30, 3))
        q, k, v = (rng.standard_normal(s).astype(dtype) for s in [(T, D), (n, D), (n, D)])
        mask = rng.random((T, n)) < 0.4
        mask[0] = False  # a row that sees nothing
        out, lse = oracle.attention(q, k, v, mask)
        want_out, want_lse = attention_rule(q, k, v, mask)
        np.testing.assert_allclose(out, want_out, atol=1e-12)
        np.testing.assert_allclose(lse, want_lse, rtol=1e-13)
        assert lse[0] == -math.inf and not out[0].any()


def test_empty_chunk_and_fully_masked_rows():
    q = np.ones((3, 4))
    out, lse = oracle.attention(q, np.zeros((0, 4)), np.zeros((0, 4)), np.zeros((3, 0), bool))
    assert out.shape == (3, 4) and not out.any() and (lse == -math.inf).all()
    assert not oracle.masked_softmax(np.array([[5.0, 6.0]]), np.zeros((1, 2), bool)).any()


def test_large_logits_figures():
    # Two allowed entries 1e4 and 1e4 - 1 in float32: weights 1 / (1 + e^-1) and e^-1 / (1 + e^-1).
    scores = np.array([[1e4, 1e4 - 1, -1e4]], dtype=np.float32)
    probs = oracle.masked_softmax(scores, np.array([[True, True, False]]))
    np.testing.assert_allclose(probs, [[1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1)), 0.0]])
    # Every allowed score near -1e300 in float64: still a proper distribution.
    assert oracle.masked_softmax(np.array([[-1e300, -1e300]]), np.ones((1, 2), bool)).tolist() == [[0.5, 0.5]]


def test_state_lse_meaning():
    m = np.array([4.0, -np.inf, -1e30, np.nan])
    l = np.array([math.exp(0.5), 0.0, 0.0, 1.0])
    assert oracle.state_lse(m, l)[:3].tolist() == [4.5, -math.inf, -math.inf]
    assert math.isnan(oracle.state_lse(m, l)[3])


def test_seed_figure_naive_rescale_of_an_empty_row_is_nan_with_a_warning():
    # The classic mistake from the seed: the row max is -inf and the rescale computes NaN.
    row = np.full(4, -np.inf)
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        naive = np.exp(row - row.max())
    assert np.isnan(naive).all()
    assert any("invalid value encountered in subtract" in str(w.message) for w in caught)


@pytest.mark.parametrize("dtype,c", [(np.float32, 8.0), (np.float32, 2.0 ** 20), (np.float64, 2.0 ** 40)])
def test_large_logit_inputs_have_exact_scores(dtype, c):
    # The hidden large-logit cases rely on q k^T / 4 being exact in the input dtype.
    q, k, _ = checks._exact_large_qkv(np.dtype(dtype), c)(np.random.default_rng(3), 7, 11)
    assert np.array_equal((q @ k.T) * dtype(0.25), oracle.scaled_scores(q, k))
    assert np.abs(oracle.scaled_scores(q, k)).max() > 1e3


def softmax_case(scale=3.0, dtype=np.float64, seed=5):
    rng = np.random.default_rng(seed)
    scores = (rng.standard_normal((6, 9)) * scale).astype(dtype)
    mask = rng.random((6, 9)) < 0.5
    mask[np.arange(6), np.arange(6)] = True
    mask[2] = False
    return diagnosis.SoftmaxCase(scores, mask, "masked_softmax(...)", {})


def named(explanation):
    return [diagnosis_id for diagnosis_id, _ in explanation.named]


def test_each_softmax_variant_is_named_and_the_right_answer_is_not():
    case = softmax_case()
    assert named(diagnosis.explain_softmax([(case, softmax_rule(case.scores, case.mask))])) == []
    assert named(diagnosis.explain_softmax([(case, diagnosis.softmax_nan_rows(case))])) == ["nan_on_fully_masked_row"]
    assert named(diagnosis.explain_softmax([(case, diagnosis.softmax_uniform_rows(case))])) == ["finite_mask_sentinel"]
    big = softmax_case(scale=3e3, dtype=np.float32)
    big.mask[2, 0] = True  # every row allows something: only the overflow is on trial
    assert named(diagnosis.explain_softmax([(big, diagnosis.softmax_without_max(big))])) == ["overflow_without_max"]
    odd = softmax_case()
    odd.scores[0][~odd.mask[0]] = np.nan
    assert named(diagnosis.explain_softmax([(odd, diagnosis.softmax_additive_bias(odd))])) == ["additive_mask_bias"]


def test_a_softmax_mistake_is_named_only_when_it_explains_every_failing_case():
    nan_case, other = softmax_case(), softmax_case(seed=6)
    shifted = other.want * (1 - 1e-6)  # off a little everywhere: no known mistake
    explanation = diagnosis.explain_softmax([(nan_case, diagnosis.softmax_nan_rows(nan_case)), (other, shifted)])
    assert named(explanation) == []
    assert explanation.hint == "consistent with nan on fully masked row in this case"


def test_two_softmax_mistakes_each_explaining_some_cases_are_both_named():
    nan_case, big = softmax_case(), softmax_case(scale=3e3, dtype=np.float32, seed=7)
    big.mask[2, 0] = True
    explanation = diagnosis.explain_softmax([(nan_case, diagnosis.softmax_nan_rows(nan_case)),
                                             (big, diagnosis.softmax_without_max(big))])
    assert sorted(named(explanation)) == ["nan_on_fully_masked_row", "overflow_without_max"]


def attention_case(dtype=np.float64, scale=1.0, cuts=None):
    rng = np.random.default_rng(9)
    T, n, D = 7, 23, 5
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in [(T, D), (n, D), (n, D)])
    mask = rng.random((T, n)) < 0.6
    mask[3] = False
    return diagnosis.AttentionCase((q * scale).astype(dtype), k, v, mask, "state", {}, cuts)


def answer(case, out, lse=None):
    lse = case.right.lse if lse is None else lse
    return diagnosis.AttentionAnswer(out, lse, lse, np.where(np.isinf(lse), 0.0, 1.0))


def test_each_attention_variant_is_named_and_the_right_answer_is_not():
    case = attention_case()
    want_out, want_lse = attention_rule(case.q, case.k, case.v, case.mask)
    assert named(diagnosis.explain_attention([(case, answer(case, want_out, want_lse))])) == []
    for variant, expected in [(diagnosis.attention_nan_rows, "nan_on_fully_masked_row"),
                              (diagnosis.attention_uniform_rows, "finite_mask_sentinel")]:
        assert named(diagnosis.explain_attention([(case, answer(case, variant(case)))])) == [expected]
    unscaled_out, unscaled_lse = diagnosis.attention_without_scale(case)
    assert named(diagnosis.explain_attention([(case, answer(case, unscaled_out, unscaled_lse))])) == ["missing_scale"]
    # a row that sees one key has the right output without the scale: only its lse tells
    single = attention_case()
    single.mask[:] = False
    single.mask[:, 4] = True
    _, single_lse = diagnosis.attention_without_scale(single)
    assert named(diagnosis.explain_attention([(single, answer(single, single.want, single_lse))])) \
        == ["missing_scale"]
    merged = attention_case(cuts=[0, 5, 5, 17, 23])
    unscaled = diagnosis.merged_without_rescale(merged)
    assert named(diagnosis.explain_attention([(merged, answer(merged, unscaled))])) == ["no_rescale_on_merge"]
    big = attention_case(np.float32, scale=300.0)
    big.mask[3] = True
    assert named(diagnosis.explain_attention([(big, answer(big, diagnosis.attention_without_max(big)))])) \
        == ["overflow_without_max"]


def test_state_diagnoses_read_m_plus_log_l():
    case = attention_case()
    nan_lse, finite_lse = case.right.lse.copy(), case.right.lse.copy()
    nan_lse[3], finite_lse[3] = np.nan, -1e30 + math.log(23)
    assert named(diagnosis.explain_attention([(case, answer(case, case.want, nan_lse))])) \
        == ["nan_on_fully_masked_row"]
    assert named(diagnosis.explain_attention([(case, answer(case, case.want, finite_lse))])) \
        == ["finite_mask_sentinel"]


def test_nan_after_merging_may_hit_a_row_that_saw_keys_and_hide_behind_a_zero_output():
    merged = attention_case(cuts=[0, 5, 5, 17, 23])
    out, lse = merged.want.copy(), merged.right.lse.copy()
    out[0], lse[0] = 0.0, np.nan  # finalize divided only where l > 0, and l was NaN
    assert named(diagnosis.explain_attention([(merged, answer(merged, out, lse))])) == ["nan_on_fully_masked_row"]
    one_chunk = attention_case()  # without merging, a row that saw keys is not the empty-row mistake
    assert named(diagnosis.explain_attention([(one_chunk, answer(one_chunk, out, lse))])) == []


def test_a_passing_case_rules_out_a_mistake_that_would_have_broken_it():
    # Overflow on one case, but another case whose scores all sit far below zero came back right:
    # exp of the raw scores would have underflowed there, so the raw-exp mistake is ruled out.
    big = softmax_case(scale=3e3, dtype=np.float32, seed=7)
    big.mask[2, 0] = True
    low = diagnosis.SoftmaxCase((np.random.default_rng(8).uniform(0, 3, (4, 7)) - 1e4).astype(np.float32),
                                np.ones((4, 7), bool), "masked_softmax(...)", {})
    assert not np.array_equal(diagnosis.softmax_without_max(low), low.want)  # it would have underflowed
    failing = [(big, diagnosis.softmax_without_max(big))]
    assert named(diagnosis.explain_softmax(failing)) == ["overflow_without_max"]
    explanation = diagnosis.explain_softmax(failing, passes=[(low, low.want)])
    assert named(explanation) == [] and explanation.hint == ""
    # a passing case where the mistake changes nothing (every row sees one key) rules nothing out
    one = diagnosis.SoftmaxCase(np.array([[5.0, 7.0]]), np.array([[False, True]]), "masked_softmax(...)", {})
    assert named(diagnosis.explain_softmax(failing, passes=[(one, one.want)])) == ["overflow_without_max"]


def test_a_warning_with_nan_says_both_and_one_without_says_only_the_warning():
    from types import SimpleNamespace
    warned = ["RuntimeWarning: overflow encountered in exp"]
    nan = checks._quiet_miss(SimpleNamespace(warnings=warned, value=np.array([np.nan]), call="f()"), {}, "huge scores",
                             empty_rows=False)
    quiet_values = checks._quiet_miss(SimpleNamespace(warnings=warned, value=np.array([1.0]), call="f()"), {},
                                      "huge scores", empty_rows=False)
    assert nan.kind == "nan" and "returned NaN and raised a numpy warning" in nan.message
    assert quiet_values.kind == "hygiene" and "returned NaN" not in quiet_values.message
