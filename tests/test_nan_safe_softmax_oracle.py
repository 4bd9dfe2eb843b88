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


def softmax_case():
    rng = np.random.default_rng(5)
    scores = rng.standard_normal((6, 9)) * 3
    mask = rng.random((6, 9)) < 0.5
    mask[np.arange(6), np.arange(6)] = True
    mask[2] = False
    return scores, mask


def test_each_softmax_variant_is_named_and_the_right_answer_is_not():
    scores, mask = softmax_case()
    assert diagnosis.diagnose_softmax(oracle.masked_softmax(scores, mask), scores, mask, 1e-10) is None
    assert diagnosis.diagnose_softmax(softmax_rule(scores, mask), scores, mask, 1e-10) is None
    assert diagnosis.diagnose_softmax(diagnosis.softmax_nan_rows(scores, mask), scores, mask, 1e-10)[0] \
        == "nan_on_fully_masked_row"
    assert diagnosis.diagnose_softmax(diagnosis.softmax_uniform_rows(scores, mask), scores, mask, 1e-10)[0] \
        == "finite_mask_sentinel"
    big = np.where(mask, scores * 1e3, 0.0).astype(np.float32)
    assert diagnosis.diagnose_softmax(diagnosis.softmax_without_max(big, mask), big, mask, 2e-5)[0] \
        == "overflow_without_max"
    odd = scores.copy()
    odd[0][~mask[0]] = np.nan
    assert diagnosis.diagnose_softmax(diagnosis.softmax_additive_bias(odd, mask), odd, mask, 1e-10)[0] \
        == "additive_mask_bias"


def attention_case(dtype=np.float64, scale=1.0):
    rng = np.random.default_rng(9)
    T, n, D = 7, 23, 5
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in [(T, D), (n, D), (n, D)])
    mask = rng.random((T, n)) < 0.6
    mask[3] = False
    return (q * scale).astype(dtype), k, v, mask


def test_each_attention_variant_is_named_and_the_right_answer_is_not():
    q, k, v, mask = attention_case()
    right, _ = oracle.attention(q, k, v, mask)
    assert diagnosis.diagnose_attention(right, q, k, v, mask, 1e-10) is None
    assert diagnosis.diagnose_attention(right, q, k, v, mask, 1e-10, cuts=[0, 5, 5, 17, 23]) is None
    for variant, expected in [(diagnosis.attention_nan_rows, "nan_on_fully_masked_row"),
                              (diagnosis.attention_uniform_rows, "finite_mask_sentinel"),
                              (diagnosis.attention_without_scale, "missing_scale")]:
        assert diagnosis.diagnose_attention(variant(q, k, v, mask), q, k, v, mask, 1e-10)[0] == expected
    cuts = [0, 5, 5, 17, 23]
    unscaled = diagnosis.merged_without_rescale(q, k, v, mask, cuts)
    assert diagnosis.diagnose_attention(unscaled, q, k, v, mask, 1e-10, cuts=cuts)[0] == "no_rescale_on_merge"
    q, k, v, mask = attention_case(np.float32, scale=300.0)
    mask[3] = True
    broken = diagnosis.attention_without_max(q, k, v, mask)
    assert diagnosis.diagnose_attention(broken, q, k, v, mask, 2e-5)[0] == "overflow_without_max"
