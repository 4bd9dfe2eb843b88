"""The hidden oracle for paged_kv_cache against hand-computed cases, and the diagnosis engine
naming each known mistake (alone and two at once) while leaving unexplained outputs unnamed."""
import math

import numpy as np
import pytest

from grader.hidden.paged_kv_cache import diagnosis, oracle
from grader.hidden.paged_kv_cache.diagnosis import Failure, Layout


def test_attention_by_hand_one_head():
    # D = 1, so the scale is 1. Keys 0 and 1, query ln 2 for the last token: scores 0 and ln 2,
    # weights 1/3 and 2/3 over values 3 and 6 give 5. The first token sees only itself: 3.
    keys = np.array([0.0, 1.0]).reshape(2, 1, 1)
    values = np.array([3.0, 6.0]).reshape(2, 1, 1)
    q = np.array([7.0, math.log(2)]).reshape(2, 1, 1)
    np.testing.assert_allclose(oracle.attention(keys, values, q)[:, 0, 0], [3.0, 5.0], rtol=1e-12)
    np.testing.assert_allclose(oracle.attention(keys, values, q[1:])[:, 0, 0], [5.0], rtol=1e-12)


def test_attention_by_hand_grouped_heads():
    # One token, so each query head returns the value of the kv head it reads: 4 query heads
    # over 2 kv heads, heads 0 and 1 read kv head 0 (value 10), heads 2 and 3 kv head 1 (value 20).
    keys = np.zeros((1, 2, 1))
    values = np.array([10.0, 20.0]).reshape(1, 2, 1)
    q = np.ones((1, 4, 1))
    np.testing.assert_array_equal(oracle.attention(keys, values, q)[0, :, 0], [10, 10, 20, 20])
    # Groups of 3: 6 query heads over 2 kv heads.
    np.testing.assert_array_equal(oracle.attention(keys, values, np.ones((1, 6, 1)))[0, :, 0],
                                  [10, 10, 10, 20, 20, 20])


def _tokens(n):
    return np.zeros((n, 1, 1)), np.zeros((n, 1, 1))


def test_fewest_blocks_by_hand():
    h = oracle.Histories(block_size=4, num_kv_heads=1, head_dim=1)
    h.add(0)
    h.append(0, *_tokens(6))  # blocks [a, b], b holds 2 of 4
    assert h.fewest_blocks() == 2
    h.fork(0, 1)  # shares a and b
    assert h.fewest_blocks() == 2
    assert h.blocks_needed(1, 1) == 1  # the copy of b, no new block
    h.append(1, *_tokens(1))
    assert h.fewest_blocks() == 3
    assert h.blocks_needed(0, 2) == 0  # b is sequence 0's alone now: no copy
    h.append(0, *_tokens(2))  # 8 tokens: b is full
    h.fork(0, 2)
    assert h.blocks_needed(2, 1) == 1  # a full shared block is never copied: one new block
    h.append(2, *_tokens(1))
    assert h.fewest_blocks() == 4
    h.free(0)
    assert h.fewest_blocks() == 4  # 2 still holds a and b
    h.free(2)
    assert h.fewest_blocks() == 2  # 1 holds a and its copy of b


def _layout(rng, lens, bs=7, Hkv=4, D=5):
    counts = [math.ceil(L / bs) for L in lens]
    shape = (sum(counts) + max(counts), bs, Hkv, D)
    layout = Layout(bs, rng.standard_normal(shape), rng.standard_normal(shape))
    order = rng.permutation(sum(counts))
    start = 0
    for seq_id, (L, n) in enumerate(zip(lens, counts)):
        layout.tables[seq_id], layout.lens[seq_id] = order[start:start + n], L
        start += n
    return layout


def _heads(keys, values, q, kv_head_of):
    """Each query head h attending kv head kv_head_of(h), via the oracle one head at a time."""
    out = np.empty(q.shape)
    for h in range(q.shape[1]):
        j = kv_head_of(h)
        out[:, h:h + 1] = oracle.attention(keys[:, j:j + 1], values[:, j:j + 1], q[:, h:h + 1])
    return out


def _slots(layout, seq_id, blocks):
    """Every slot of the given blocks in order, as a history."""
    return layout.key_pool[blocks].reshape(-1, *layout.key_pool.shape[2:]), \
        layout.value_pool[blocks].reshape(-1, *layout.value_pool.shape[2:])


@pytest.fixture
def case():
    rng = np.random.default_rng(5)
    layout = _layout(rng, [17, 23])  # sequence 1: 4 blocks, its last holds 2 of 7
    q = rng.standard_normal((3, 8, 5))  # 8 query heads over 4 kv heads
    return layout, q


def test_the_right_answer_is_one_reading_without_mistakes(case):
    layout, q = case
    keys, values = layout.gather(1)
    right = oracle.attention(keys, values, q)
    found = diagnosis.readings(layout, 1, q, right)
    assert diagnosis.Reading("table", False, (0, 0, 1, 1, 2, 2, 3, 3)) in found
    assert all(r.mistakes(4) == frozenset() for r in found)


def test_modulo_heads_are_named_with_the_example_sentence(case):
    layout, q = case
    keys, values = layout.gather(1)
    got = _heads(keys, values, q, lambda h: h % 4)
    (name, sentence), = diagnosis.explain([Failure(layout, 1, q, got, None)])
    assert name == "gqa_head_mapping"
    assert "query head 1 read kv head 1 (1 % 4)" in sentence and "it reads kv head 0" in sentence


def test_slots_after_the_last_token_are_named(case):
    layout, q = case
    keys, values = _slots(layout, 1, layout.tables[1])  # 28 slots, 23 tokens
    got = oracle.attention(keys, values, q)  # the queries as the last of 28 slots
    (name, sentence), = diagnosis.explain([Failure(layout, 1, q, got, None)])
    assert name == "stale_slots_visible"
    assert "also attended the 5 slots after its last token" in sentence and "saw 28 keys instead of 23" in sentence


def test_physical_block_order_is_named(case):
    layout, q = case
    keys, values = _slots(layout, 1, np.arange(4))  # blocks 0..3, whatever the table says
    got = oracle.attention(keys[:23], values[:23], q)
    (name, sentence), = diagnosis.explain([Failure(layout, 1, q, got, None)])
    assert name == "physical_order_assumed" and "p // block_size" in sentence


def test_two_mistakes_at_once_are_both_named(case):
    layout, q = case
    keys, values = _slots(layout, 1, layout.tables[1])
    got = _heads(keys, values, q, lambda h: h % 4)
    names = [name for name, _ in diagnosis.explain([Failure(layout, 1, q, got, None)])]
    assert names == ["gqa_head_mapping", "stale_slots_visible"]


def test_a_mistake_is_named_only_when_it_explains_every_failure(case):
    layout, q = case
    keys, values = layout.gather(1)
    modulo = Failure(layout, 1, q, _heads(keys, values, q, lambda h: h % 4), None)
    noise = Failure(layout, 1, q, np.zeros(q.shape), None)
    assert diagnosis.explain([noise]) == []
    assert diagnosis.explain([modulo, noise]) == []


def test_overwrite_by_a_sharer_and_shared_blocks_returned():
    bs = 4
    layout = Layout(bs, np.zeros((3, bs, 1, 1)), np.zeros((3, bs, 1, 1)))
    h = oracle.Histories(bs, 1, 1)
    h.add(0)
    h.append(0, np.arange(1.0, 6.0).reshape(5, 1, 1), np.zeros((5, 1, 1)))
    h.fork(0, 1)
    h.append(1, np.full((1, 1, 1), 9.0), np.zeros((1, 1, 1)))
    h.append(0, np.full((1, 1, 1), 6.0), np.zeros((1, 1, 1)))
    # A cache without copy-on-write: both tables [0, 1], and block 1 slot 1 (position 5) holds
    # sequence 1's token 9, written last.
    layout.tables = {0: np.array([0, 1]), 1: np.array([0, 1])}
    layout.lens = {0: 6, 1: 6}
    layout.key_pool[0, :, 0, 0] = [1, 2, 3, 4]
    layout.key_pool[1, :2, 0, 0] = [5, 9]
    sentence = diagnosis.overwritten_by_sharer(layout, h, [(0, 5)])
    assert sentence.startswith("sequence 1 appended its position 5 into block 1")
    # After free(0) returned both blocks although sequence 1 holds them: 3 free, 1 expected.
    layout.tables, layout.lens = {1: np.array([0, 1])}, {1: 6}
    sentence = diagnosis.returned_shared_blocks(0, {0: np.array([0, 1])}, layout, got=3, expected=1)
    assert sentence.startswith("free(0) returned 2 blocks")
    assert diagnosis.returned_shared_blocks(0, {0: np.array([0, 1])}, layout, got=2, expected=1) is None


@pytest.mark.parametrize("seed", range(8))
def test_ids_come_back_after_free_in_every_drawing(seed):
    # operation_sequences: the directed family frees an id that was attended, adds it again (and forks
    # into another freed one), appends at least the old length and attends, within the pool.
    from grader.hidden.paged_kv_cache.checks import SEQUENCE_SIZES, _reused_ids

    rng = np.random.default_rng(seed)
    for nb, bs, Hkv, D, _ in SEQUENCE_SIZES[:2]:
        ops = _reused_ids(rng, (nb, bs, Hkv, D))
        h, freed, attended_after, lens_before = oracle.Histories(bs, 1, 1), set(), set(), {}
        for op in ops:
            if op.name == "add":
                h.add(op.args[0])
            elif op.name == "fork":
                h.fork(*op.args)
            elif op.name == "free":
                lens_before[op.args[0]] = h.length(op.args[0])
                h.free(op.args[0])
                freed.add(op.args[0])
            elif op.name == "append":
                assert h.blocks_needed(op.args[0], op.args[1]) <= nb - h.fewest_blocks()  # it fits
                h.append(op.args[0], *_tokens(op.args[1]))
            elif op.name == "attend" and op.args[0] in freed:
                assert h.length(op.args[0]) >= lens_before[op.args[0]]
                attended_after.add(op.args[0])
        assert len(attended_after) == 2


def test_large_block_sizes_pass_the_usual_constants():
    from grader.hidden.paged_kv_cache.checks import _large_block_sizes

    for seed in range(20):
        sizes = _large_block_sizes(np.random.default_rng(seed))
        assert all(n & (n - 1) for n in sizes)  # no power of two
        assert 512 < sizes[0] < 1024 < sizes[1] < 2048 and 4096 < sizes[2]
