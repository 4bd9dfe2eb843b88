"""The hidden oracle for varlen_attention agrees with small cases worked out by hand."""
import numpy as np

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
        assert variant.names(prefills) == ("global_offset",)
        np.testing.assert_array_equal(variant.answer(prefills), oracle.varlen_mask(*prefills))
        assert not np.array_equal(variant.answer(uneven), oracle.varlen_mask(*uneven))


def test_every_variant_differs_from_the_oracle_somewhere_in_the_checks_batches():
    rng = np.random.default_rng(0)
    batches = [checks.Packed(*counts).inputs for counts in checks.mixed_batches(rng, 27)]
    for variant in diagnosis.MASK_VARIANTS:
        assert any(not np.array_equal(variant.answer(b), oracle.varlen_mask(*b)) for b in batches)


def test_drawn_batches_cover_every_kind_and_size():
    rng = np.random.default_rng(1)
    batches = checks.mixed_batches(rng, 27)
    assert {len(n_q) for n_q, _ in batches} == set(range(1, 10))
    pairs = [(q, k) for n_q, n_k in batches for q, k in zip(n_q, n_k)]
    assert any(q == 0 for q, _ in pairs) and any(q == k for q, k in pairs) and any(0 < q < k for q, k in pairs)
    assert all(q <= k for q, k in pairs)
