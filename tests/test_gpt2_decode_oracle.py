"""gpt2_decode: the hidden oracle agrees with the kit's gpt2.py, states the position facts of the
seed, and every known-wrong decode loop is recognised while the right one is not."""
import importlib.util
import sys

import numpy as np
import pytest

from grader import catalog
from grader.hidden.gpt2_decode import checks, diagnosis, oracle

GPT2_PATH = catalog.get("gpt2_decode").folder / "gpt2.py"


@pytest.fixture(scope="module")
def gpt2():
    spec = importlib.util.spec_from_file_location("kit_gpt2_under_test", GPT2_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def plain(params):
    return {name: np.array(value) for name, value in params.items()}


@pytest.mark.parametrize("seed", range(4))
def test_oracle_matches_gpt2_forward_on_random_configs(gpt2, seed):
    rng = np.random.default_rng(seed)
    config = checks.random_config(rng)
    model = gpt2.GPT2.random(gpt2.GPT2Config(**config), seed)
    ids = [int(t) for t in rng.integers(0, config["vocab_size"], int(rng.integers(1, config["n_ctx"] + 1)))]
    want = model.forward(ids)
    got = oracle.logits(plain(model.params), config["n_head"], ids)
    assert np.abs(got - want).max() <= 1e-10 * max(1, np.abs(want).max()), config


def test_forward_is_causal_and_deterministic_across_builds(gpt2):
    config = gpt2.GPT2Config(**checks.BASE)
    a, b = gpt2.GPT2.random(config, 3), gpt2.GPT2.random(config, 3)
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    ids = list(np.random.default_rng(0).integers(0, 97, 30))
    # a prefix's logits do not depend on the tokens after it
    np.testing.assert_allclose(a.forward(ids[:17]), a.forward(ids)[:17], rtol=0, atol=1e-10)


def test_position_is_the_length_before_the_append(gpt2):
    # The seed's figure: a cache of 4 positions (0..3); the new token is embedded at wpe[4].
    model = gpt2.GPT2.random(gpt2.GPT2Config(**checks.BASE), 0)
    params, ids = plain(model.params), [5, 9, 2, 71, 40]
    right = oracle.logits(params, 5, ids)[4]
    at = {t: oracle.logits(params, 5, ids, positions=[0, 1, 2, 3, t])[4] for t in (0, 4, 5)}
    assert oracle.close(at[4], right)
    assert not oracle.close(at[5], right)  # read after the append: P + 1
    assert not oracle.close(at[0], right)  # reset: as if it began the sequence
    assert np.abs(at[5] - right).max() > 0.1  # no crash, just clearly wrong numbers


def test_positions_past_the_table_are_refused(gpt2):
    model = gpt2.GPT2.random(gpt2.GPT2Config(**dict(checks.BASE, n_ctx=5)), 0)
    with pytest.raises(IndexError):
        oracle.logits(plain(model.params), 5, [1, 2], positions=[4, 5])


def test_top_left_equals_right_without_a_cache_only(gpt2):
    model = gpt2.GPT2.random(gpt2.GPT2Config(**checks.BASE), 1)
    params, ids = plain(model.params), list(range(10, 22))
    top_left = [range(i + 1) for i in range(8)] + [range(i + 1) for i in range(4)]  # chunks 8, 4
    right = oracle.logits(params, 5, ids)
    wrong = oracle.logits(params, 5, ids, attends=top_left)
    assert oracle.close(wrong[:8], right[:8]) and not oracle.close(wrong[8:], right[8:])


CHUNKS = [6, 1, 4, 1, 3, 2, 1]


@pytest.fixture(scope="module")
def run(gpt2):
    model = gpt2.GPT2.random(gpt2.GPT2Config(**checks.BASE), 5)
    ids = [int(t) for t in np.random.default_rng(9).integers(0, 97, sum(CHUNKS))]
    return plain(model.params), ids


def run_logits(params, ids, rules):
    """Logits of a run fed in CHUNKS where step n follows ``rules[n]``, read in one pass."""
    positions, attends = [], []
    for rule, (P, T) in zip(rules, oracle.schedule_steps(CHUNKS)):
        positions += rule.positions(P, T)
        attends += rule.attends(P, T)
    return oracle.logits(params, 5, ids, positions, attends)


def judged(params, ids, got):
    want, wrong = diagnosis.replay(got, params, 5, ids, CHUNKS)
    return want, wrong, diagnosis.explain_steps([(s, got[s.P:s.P + s.T]) for s in wrong])


def test_the_right_loop_draws_no_diagnosis(run):
    params, ids = run
    want, wrong, found = judged(params, ids, oracle.logits(params, 5, ids))
    assert oracle.close(want, oracle.logits(params, 5, ids)) and wrong == [] and not found.named


def test_replay_in_steps_equals_one_pass(run):
    params, ids = run
    tokens, parts = oracle.Tokens(params, 5), []
    for P, T in oracle.schedule_steps(CHUNKS):
        tokens, part = tokens.then(ids[P:P + T], range(P, P + T), [range(P + i + 1) for i in range(T)])
        parts.append(part)
    assert oracle.close(np.concatenate(parts), oracle.logits(params, 5, ids))


@pytest.mark.parametrize("index", range(len(diagnosis.MISTAKES)))
def test_each_mistake_is_named_from_every_step(run, index):
    params, ids = run
    diagnosis_id, rule, _ = diagnosis.MISTAKES[index]
    wrong_logits = run_logits(params, ids, [rule] * len(CHUNKS))
    _, wrong, found = judged(params, ids, wrong_logits)
    assert wrong and [i for i, _ in found.named] == [diagnosis_id]


def test_position_sentence_names_the_figures(run):
    params, ids = run
    reset = diagnosis.MISTAKES[2][1]
    _, _, found = judged(params, ids, run_logits(params, ids, [reset] * len(CHUNKS)))
    # CHUNKS = [6, 1, ...]: the first step the reset shows in is the decode step after a prefill of 6
    assert "with 6 tokens cached, the new ones were embedded from position 0, not 6" in found.named[0][1]


def test_a_right_step_after_a_wrong_one_is_not_a_failure_of_its_own(run):
    # only the second step (6 cached, 1 new) resets; later steps are right on the keys it left
    params, ids = run
    reset = diagnosis.MISTAKES[2][1]
    rules = [diagnosis.RIGHT, reset] + [diagnosis.RIGHT] * (len(CHUNKS) - 2)
    got = run_logits(params, ids, rules)
    want, wrong, found = judged(params, ids, got)
    assert not oracle.close(got[7:], want[7:])  # later logits differ from the truth ...
    assert [(s.P, s.T) for s in wrong] == [(6, 1)]  # ... but only the reset step broke a rule
    assert [i for i, _ in found.named] == ["position_reset"]


def test_two_mistakes_in_one_step_are_both_named(run):
    params, ids = run
    reset, top_left = diagnosis.MISTAKES[2][1], diagnosis.MISTAKES[3][1]
    both = diagnosis.Rule("both", reset.position, top_left.sees)
    _, _, found = judged(params, ids, run_logits(params, ids, [both] * len(CHUNKS)))
    assert sorted(i for i, _ in found.named) == ["position_reset", "top_left_chunk_mask"]


def test_two_mistakes_on_different_steps_are_both_named(run):
    params, ids = run
    one_past, reset = diagnosis.MISTAKES[0][1], diagnosis.MISTAKES[2][1]
    rules = [reset if T > 1 else one_past for T in CHUNKS]
    _, _, found = judged(params, ids, run_logits(params, ids, rules))
    assert sorted(i for i, _ in found.named) == ["position_after_append", "position_reset"]


def test_a_mistake_that_fits_some_steps_only_is_not_named(run):
    # the reset at the step after the prefill, then positions two too far: no known mistake
    params, ids = run
    reset = diagnosis.MISTAKES[2][1]
    two_past = diagnosis.Rule("two_past", lambda P, T, i: P + 2 + i, reset.sees)
    rules = [diagnosis.RIGHT, reset] + [two_past] * (len(CHUNKS) - 2)
    _, wrong, found = judged(params, ids, run_logits(params, ids, rules))
    assert len(wrong) == len(CHUNKS) - 1 and not found.named
    assert found.hint.startswith("the step with 6 tokens cached and 1 new is consistent with position reset, "
                                 f"which fits only 1 of the {len(wrong)} wrong steps")


def test_c_attn_counts_the_rows_it_projects(gpt2):
    model = gpt2.GPT2.random(gpt2.GPT2Config(**checks.BASE), 0)
    model.forward([1, 2, 3, 4, 5])
    assert model.rows_projected == [5.0, 5.0]
    W, x = model.params["h.1.attn.c_attn.weight"], np.ones((3, 60))
    q, k, v = np.split(W, 3, axis=1)
    results = [x @ q, x @ k, x @ v, np.dot(x[0], W), np.einsum("tc,cd->td", x, W), W.T @ x.T]
    assert model.rows_projected == pytest.approx([5.0, 5.0 + 3 + 1 + 3 + 3])
    assert model.widest_projection == [5.0, 5.0]
    assert all(type(r) is np.ndarray for r in results)
    model.reset_counts()
    x[:2] @ W
    assert model.rows_projected == [0.0, 2.0] and model.widest_projection == [0.0, 2.0]
    assert type(W * 2) is np.ndarray and np.array_equal(np.asarray(W) * 2, W * 2)
