"""The hidden oracle for tree_mask agrees with an independent statement of the rule."""
import numpy as np
import pytest

from grader.hidden.decode_mask import oracle as decode_oracle
from grader.hidden.tree_mask import checks, diagnosis, oracle


def subtree_rule(parents, P):
    # Stated differently on purpose: walk DOWN from each root with child lists. A draft's depth
    # is how many steps the walk took; draft j is visible to every draft in the subtree of j.
    children = {i: [] for i in range(-1, len(parents))}
    for i, p in enumerate(parents):
        children[p].append(i)
    depth, visible = {}, np.zeros((len(parents), P + len(parents)), dtype=bool)
    visible[:, :P] = True
    stack = [(root, 0) for root in children[-1]]
    while stack:
        node, d = stack.pop()
        depth[node] = d
        stack += [(c, d + 1) for c in children[node]]
    for j in range(len(parents)):
        below, todo = [], [j]
        while todo:
            below.append(todo.pop())
            todo += children[below[-1]]
        visible[below, P + j] = True
    return np.array([P + depth[i] for i in range(len(parents))], dtype=np.int64), visible


@pytest.mark.parametrize("seed", range(4))
def test_oracle_matches_the_subtree_rule_on_random_trees(seed):
    rng = np.random.default_rng(seed)
    for _ in range(12):
        T, P = int(rng.integers(1, 60)), int(rng.integers(0, 50))
        parents = checks.random_tree(rng, T) if rng.random() < 0.5 else checks.deep_path(rng, T)
        positions, visible = subtree_rule(parents, P)
        np.testing.assert_array_equal(oracle.positions(parents, P), positions)
        np.testing.assert_array_equal(oracle.mask(parents, P), visible)


def test_generated_trees_are_valid_with_several_roots():
    rng = np.random.default_rng(11)
    for T in (2, 7, 13, 37, 101):
        for parents in (checks.random_tree(rng, T), checks.deep_path(rng, T)):
            assert all(-1 <= p < i for i, p in enumerate(parents))
        assert checks.random_tree(rng, T).count(-1) >= 2
    assert oracle.positions(checks.deep_path(np.random.default_rng(0), 250), 0).max() > 100


@pytest.mark.parametrize("T,P", [(1, 0), (5, 3), (13, 97), (40, 1)])
def test_a_chain_gives_the_decode_mask(T, P):
    assert np.array_equal(oracle.mask(checks.chain(T), P), decode_oracle.causal_mask(T, P + T))
    assert np.array_equal(oracle.positions(checks.chain(T), P), P + np.arange(T))


def test_eight_candidate_tree_from_the_seed_is_not_a_triangle():
    # 8 draft tokens: two candidates for the next token, each with continuations.
    parents, P = [-1, -1, 0, 0, 1, 2, 2, 4], 6
    mask = oracle.mask(parents, P)
    assert mask[:, :P].all()  # the whole cache, for every draft
    assert not np.array_equal(mask[:, P:], np.tril(np.ones((8, 8), bool)))
    assert mask[7, P:].nonzero()[0].tolist() == [1, 4, 7]  # root, parent, itself
    assert oracle.positions(parents, P).tolist() == [6, 6, 7, 7, 7, 8, 8, 8]


def test_rope_depends_only_on_relative_position():
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((1, 8)), rng.standard_normal((1, 8))
    score = (oracle.rope(q, [9]) @ oracle.rope(k, [4]).T).item()
    assert score == pytest.approx((oracle.rope(q, [105]) @ oracle.rope(k, [100]).T).item(), abs=1e-12)
    assert score != pytest.approx((q @ k.T).item(), abs=1e-3)
    assert np.allclose(np.linalg.norm(oracle.rope(q, [7])), np.linalg.norm(q))


def _a_tree_where_every_variant_is_wrong():
    return [-1, 0, 1, -1, 3, 1, 2, 0, 4], 4  # depth 3, two roots, a draft index is not its depth


def _branch_decoding_case(parents, P, seed):
    """A random attention layer and tokens; each draft's output from decoding its own branch."""
    rng = np.random.default_rng(seed)
    layer = oracle.random_layer(rng, 12, 8)
    cache_x, draft_x = rng.standard_normal((P, 12)), rng.standard_normal((len(parents), 12))
    return layer, cache_x, draft_x, oracle.path_decoding(layer, cache_x, draft_x, parents)


def test_tree_attention_with_the_oracle_equals_branch_decoding():
    rng = np.random.default_rng(5)
    for T, P in [(13, 9), (7, 0), (37, 45)]:
        parents = checks.random_tree(rng, T)
        layer, cache_x, draft_x, want = _branch_decoding_case(parents, P, seed=T)
        mask, positions = oracle.mask(parents, P), oracle.positions(parents, P)
        got = oracle.tree_attention(layer, cache_x, draft_x, mask, positions)
        assert np.abs(got - want).max() < 1e-12


def test_every_variant_changes_the_attention_output():
    # So the attention check alone catches each known mistake, positions included.
    parents, P = _a_tree_where_every_variant_is_wrong()
    layer, cache_x, draft_x, want = _branch_decoding_case(parents, P, seed=8)
    right_mask, right_pos = oracle.mask(parents, P), oracle.positions(parents, P)
    for _, variant, _ in diagnosis.MASK_VARIANTS:
        got = oracle.tree_attention(layer, cache_x, draft_x, variant(parents, P), right_pos)
        assert np.abs(got - want).max() > 1e-3
    for _, variant, _ in diagnosis.POSITION_VARIANTS:
        got = oracle.tree_attention(layer, cache_x, draft_x, right_mask, variant(parents, P))
        assert np.abs(got - want).max() > 1e-3


def _named(kind, case, answer):
    return [i for i, _ in diagnosis.explain_answers(kind, [(case, answer)]).named]


def test_each_variant_is_named_and_the_right_answer_is_not():
    parents, P = _a_tree_where_every_variant_is_wrong()
    for kind in ("mask", "positions"):
        assert _named(kind, (parents, P), diagnosis.RIGHT[kind]((parents, P))) == []
        for variant in diagnosis.VARIANTS[kind]:
            assert _named(kind, (parents, P), variant.build((parents, P))) == [variant.id]


def test_index_positions_sentence_gives_concrete_figures():
    parents, P = [-1, -1, 0], 100
    [(_, sentence)] = diagnosis.explain_answers("positions", [((parents, P), P + np.arange(3))]).named
    assert "draft 1 (depth 0) was placed at 100 + 1 = 101, not 100" in sentence


def test_a_mistake_that_fits_one_case_of_two_is_only_a_hint():
    a, b = ([-1, -1, 0], 100), ([-1, 0, 1], 5)
    found = diagnosis.explain_answers("positions", [(a, 100 + np.arange(3)), (b, np.array([9, 9, 9]))])
    assert found.named == [] and "index positions" in found.hint


def test_positions_past_any_mask_are_exact_and_cheap():
    # check_long_cache asks tree_positions alone about caches no [T, P + T] mask could fit: the
    # oracle (like any correct answer) answers them with T numbers, exactly, in int64
    parents = [-1, 0, 1, -1, 3, 0]
    for P in (2**31 + 7, 2**53 + 1, 2**62 + 3):
        got = oracle.positions(parents, P)
        assert got.dtype == np.int64
        assert [int(x) for x in got] == [P, P + 1, P + 2, P, P + 1, P + 1]
