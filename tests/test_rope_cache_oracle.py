"""The hidden oracle for rope_cache agrees with small cases worked out by hand, and the replayed
mistakes agree with it where they should and are told apart where they should not."""
import math

import numpy as np
import pytest

from grader.hidden.rope_cache import checks, diagnosis, oracle
from grader.hidden.rope_cache.diagnosis import Mistake


def _vec(*values):
    return np.array(values, np.float64).reshape(1, 1, -1)  # T = 1, H = 1


def test_position_zero_turns_nothing():
    x = np.arange(12.0).reshape(2, 1, 6)
    assert np.array_equal(oracle.rotate(x, [0, 0], 10000.0), x)


def test_one_pair_turns_by_the_position():
    # D = 2: theta_0 = p, so (1, 0) becomes (cos p, sin p).
    got = oracle.rotate(_vec(1.0, 0.0), [3], 10000.0)
    assert np.allclose(got, _vec(math.cos(3), math.sin(3)))


def test_the_second_pair_pairs_dimension_1_with_3_and_turns_slower():
    # D = 4, base 100: pair 1 is (1, 3) and turns by p * 100 ** (-2 / 4) = p / 10; at p = 10, 1 radian.
    got = oracle.rotate(_vec(0.0, 1.0, 0.0, 0.0), [10], 100.0)
    assert np.allclose(got, _vec(0.0, math.cos(1), 0.0, math.sin(1)))


def test_each_row_turns_at_its_own_position_and_every_head_alike():
    x = np.tile(np.array([1.0, 0.0]), (2, 3, 1))  # T = 2, H = 3, D = 2
    got = oracle.rotate(x, [2, 0], 10000.0)
    assert np.allclose(got[0], [math.cos(2), math.sin(2)]) and np.allclose(got[1], [1.0, 0.0])


def test_the_first_token_sees_only_itself():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((4, 2, 6)) for _ in range(3))
    assert np.allclose(oracle.sequence_attention(q, k, v, 10000.0, [0]), v[:1])


def _two_token_answer():
    # D = 2, q1 = k0 = k1 = (1, 0): rotated, k0 stays (1, 0), q1 and k1 become (cos 1, sin 1).
    # Scores of token 1: q1 . k0 = cos 1 and q1 . k1 = 1, both over sqrt(2). Values (1, 0), (0, 1).
    w0, w1 = math.exp(math.cos(1) / math.sqrt(2)), math.exp(1 / math.sqrt(2))
    return np.array([w0, w1]) / (w0 + w1)


def test_a_later_token_weighs_keys_by_their_rotated_scores():
    q = k = np.array([[[1.0, 0.0]], [[1.0, 0.0]]])
    v = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    got = oracle.sequence_attention(q, k, v, 10000.0, [1])
    assert np.allclose(got[0, 0], _two_token_answer())


def test_sibling_drafts_sit_at_the_same_position():
    # One cached token, then two roots with the same projections: each is the second token of
    # its own branch, so both get the two-token answer above.
    one = np.array([[[1.0, 0.0]], [[1.0, 0.0]]])
    got = oracle.tree_attention(one[:1], np.array([[[1.0, 0.0]]]), one, one, np.array([[[0.0, 1.0]]] * 2),
                                [-1, -1], 10000.0)
    assert np.allclose(got[:, 0], [_two_token_answer()] * 2)


def test_branches_run_from_the_root():
    assert oracle.branch([-1, 0, 0, 2, -1], 3) == [0, 2, 3]
    assert oracle.branch([-1, 0, 0, 2, -1], 4) == [4]


def _script(rng):
    """A prefill, a step, a chunk, a tree with siblings, one more step; shapes drawn from ``rng``."""
    H, D = int(rng.choice([1, 3, 5])), int(rng.choice([4, 6, 10, 12]))
    steps = checks.plain_steps(rng, [int(rng.integers(2, 9)), 1, 3], H, D)
    steps.append(checks.tree_step(rng, [-1, 0, 0, 2, -1], H, D))
    steps += checks.plain_steps(rng, [1], H, D)
    return checks.Script(H, D, float(rng.choice([100.0, 10000.0])), steps, "test")


def test_the_right_replay_matches_the_oracle_at_every_step():
    script = _script(np.random.default_rng(1))
    want = checks.expected(script)
    got = diagnosis.replay(script.steps, script.H, script.D, script.base, Mistake())
    assert all(diagnosis.same(g, w, 1e-9) for g, w in zip(got, want))


@pytest.mark.parametrize("seed", range(21))
def test_each_mistake_is_named_from_its_own_replay_on_any_seed(seed):
    script = _script(np.random.default_rng(seed))
    for mistake in diagnosis.MISTAKES:
        got = diagnosis.replay(script.steps, script.H, script.D, script.base, mistake)
        found = diagnosis.explaining_script(got, script.steps, script.H, script.D, script.base, 1e-9)
        assert [i for i, _ in found] == [mistake.id], (mistake, found)


def test_two_mistakes_at_once_are_both_named():
    script = _script(np.random.default_rng(3))
    both = Mistake("both", interleaved=True, shift=1)
    got = diagnosis.replay(script.steps, script.H, script.D, script.base, both)
    found = diagnosis.explaining_script(got, script.steps, script.H, script.D, script.base, 1e-9)
    assert sorted(i for i, _ in found) == ["interleaved_pairs", "position_after_append"]


def test_a_stored_key_turned_again_reads_as_twice_its_position():
    # The sentence's arithmetic: a key stored at step 1 and turned again at step 2 has angle 2p.
    rng = np.random.default_rng(4)
    steps = checks.plain_steps(rng, [4, 1], 1, 2)
    got = diagnosis.replay(steps, 1, 2, 10000.0, diagnosis.MISTAKES[0])
    assert np.allclose(got[1].keys[3], oracle.rotate(steps[0].k[3:4], [6], 10000.0)[0])
    said = diagnosis.sentence(diagnosis.MISTAKES[0], got, steps, 2, 10000.0)
    assert "position 3 (stored at step 1)" in said and "that of position 6" in said
