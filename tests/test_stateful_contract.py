"""Contract-first checks of the stateful exercises: containers judged as values, garbage that no
query may read, the diagnoses that say what happened, and end-to-end gradings of the mistakes
the earlier checks let through (real submissions, real child processes)."""
import shutil

import numpy as np
import pytest

from grader import catalog, engine
from grader.checking import CheckFailure, as_array, container_slip, garbage
from grader.hidden.paged_kv_cache import checks as paged_checks
from grader.hidden.paged_kv_cache import diagnosis as paged
from grader.hidden.paged_kv_cache import oracle as paged_oracle
from grader.hidden.ring_buffer_window import diagnosis as ring
from grader.hidden.rope_cache import oracle as rope_oracle

SOLUTIONS = catalog.KIT_ROOT / "solutions"


# -- containers ----------------------------------------------------------------------------------


def test_a_list_of_the_right_ints_is_read_as_values_and_named_as_a_slip():
    table = as_array([4, 1, 7], call="block_table(3)", shape=(3,), kind="i")
    assert table.dtype.kind == "i" and table.tolist() == [4, 1, 7]
    assert as_array([], call="block_table(0)", shape=(0,), kind="i").dtype == np.int64  # [] is no float
    assert container_slip([4, 1, 7], call="block_table(3)", dtype=np.int64).startswith("block_table(3) returned a list")
    assert container_slip(np.zeros(2, np.float32), call="out", dtype=np.float64) is not None
    assert container_slip(np.zeros(2), call="out", dtype=np.float64) is None


@pytest.mark.parametrize("value", [[1, 2], "abc", None, np.zeros((3,), np.float64)])
def test_a_wrong_shape_or_kind_is_a_wrong_answer(value):
    with pytest.raises(CheckFailure) as failed:
        as_array(value, call="block_table(3)", shape=(3,), kind="i")
    assert failed.value.kind == "wrong"


# -- values that no query may read -----------------------------------------------------------------


def test_garbage_reaches_1e30_and_stays_finite():
    values = garbage(np.random.default_rng(0), (4000,))
    assert np.isfinite(values).all() and np.abs(values).max() >= 1e30 and np.abs(values).min() > 0
    assert (values < 0).any() and (values > 0).any()


def _additive_mask_output(layout, seq_id, q):
    """paged attention over every slot of the sequence's blocks, the slots past seq_len hidden by
    adding -1e9 (the mistake the garbage exposes), one kv head per query head."""
    table = layout.tables[seq_id]
    keys, values = (pool[table].reshape(-1, *pool.shape[2:]) for pool in (layout.key_pool, layout.value_pool))
    L, T = layout.lens[seq_id], len(q)
    bias = np.where(np.arange(len(keys))[None, :] <= np.arange(L - T, L)[:, None], 0.0, -1e9)
    out = np.empty(q.shape)
    for h in range(q.shape[1]):
        scores = q[:, h] @ keys[:, h].T / np.sqrt(q.shape[2]) + bias
        w = np.exp(scores - scores.max(axis=1, keepdims=True))
        out[:, h] = w / w.sum(axis=1, keepdims=True) @ values[:, h]
    return out


def test_stale_slots_masked_by_adding_minus_1e9_are_named_where_garbage_wins():
    rng, failures = np.random.default_rng(5), []
    for _ in range(6):
        layout = paged_checks.lent_layout(rng, [10, 17], 13, 2, 3)
        for s in layout.lens:
            q = rng.standard_normal((3, 2, 3))
            keys, values = layout.gather(s)
            want = paged_oracle.attention(keys, values, q)
            f = paged.Failure(layout, s, q, _additive_mask_output(layout, s, q), want)
            failures += [] if f.right() else [f]
    assert len(failures) > 1  # the garbage of several cases outweighs -1e9; one case alone may be ambiguous
    assert [found for found, _ in paged.explain(failures)] == ["stale_slots_visible"]


def test_top_left_queries_are_named_top_left_alignment():
    rng = np.random.default_rng(2)
    layout = paged_checks.lent_layout(rng, [12], 5, 1, 4)
    (s,) = layout.lens
    q = rng.standard_normal((3, 2, 4))
    keys, values = layout.gather(s)
    top_left = paged_oracle.attention(keys[:3], values[:3], q)  # the queries as positions 0..2
    f = paged.Failure(layout, s, q, top_left, paged_oracle.attention(keys, values, q))
    assert not f.right()
    [(found, sentence)] = paged.explain([f])
    assert found == "top_left_alignment" and "first positions 0..2" in sentence


# -- precision ------------------------------------------------------------------------------------


def test_float32_rope_angles_at_position_1e5_are_beyond_the_rule_and_careful_float32_is_within():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, 2, 16)).astype(np.float32)
    p = rng.integers(90_000, 140_000, 9)
    want = rope_oracle.rotate(x, p, 10000.0)
    tol = rope_oracle.tolerance((x,), p.max(), float(np.abs(x).max()))
    half, freq = 8, 10000.0 ** (-2.0 * np.arange(8) / 16)
    careful_angle = p[:, None, None] * freq  # float64 angles, rotation in float32
    cos, sin = np.cos(careful_angle).astype(np.float32), np.sin(careful_angle).astype(np.float32)
    careful = np.concatenate([x[..., :half] * cos - x[..., half:] * sin, x[..., half:] * cos + x[..., :half] * sin], -1)
    angle32 = p.astype(np.float32)[:, None, None] * freq.astype(np.float32)
    sloppy = np.concatenate([x[..., :half] * np.cos(angle32) - x[..., half:] * np.sin(angle32),
                             x[..., half:] * np.cos(angle32) + x[..., :half] * np.sin(angle32)], -1)
    assert np.abs(careful - want).max() <= tol < 1e-3 < np.abs(sloppy - want).max()


# -- the ring's window tied to its capacity ------------------------------------------------------------


def test_a_window_of_the_capacity_is_its_own_mistake_and_ties_with_w_plus_one_only_at_c_equal_w_plus_one():
    q = np.arange(20, 23)
    ring_positions = np.array([15, 16, 17, 18, 19, 20, 21, 22, 13, 14])  # a ring of 10, wrapped
    capacity = next(v for v in ring.step_variants() if v.atoms == ("capacity_window",))
    plus_one = next(v for v in ring.step_variants() if v.atoms == ("window_plus_one",))
    wide = ring.variant_mask(capacity.mistakes, q, ring_positions, 4, capacity=10)
    assert wide.sum(axis=1).tolist() == [8, 9, 10]  # position 20 sees 13..20: every stored one up to it
    assert not np.array_equal(wide, ring.variant_mask(plus_one.mistakes, q, ring_positions, 4, capacity=10))
    assert np.array_equal(ring.variant_mask(capacity.mistakes, q, ring_positions, 9, capacity=10),
                          ring.variant_mask(plus_one.mistakes, q, ring_positions, 9, capacity=10))
    assert capacity.ids == ["window_is_capacity"]


# -- end to end: the mistakes that passed before -------------------------------------------------------


def _graded(tmp_path, exercise, module_source, checks):
    for ref in SOLUTIONS.glob("*.py"):
        shutil.copyfile(ref, tmp_path / ref.name)
    shutil.copyfile(module_source, tmp_path / f"{exercise}.py")
    return engine.grade(tmp_path, [exercise], seed=0, only_checks=set(checks)).exercise(exercise)


def _failed(result, check_id):
    return next(c for c in result.checks if c.id == check_id)


@pytest.mark.slow
def test_a_full_shared_block_copied_on_append_fails_the_operation_sequences(tmp_path):
    """Copying a full shared block wastes a block (efficiency); where the pool is tight, the wasted
    block also makes an append that fits raise RuntimeError (a wrong answer, which outranks the
    waste). Either is the mistake seen, said as such."""
    graded = _graded(tmp_path, "paged_kv_cache", SOLUTIONS / "mutants" / "paged_kv_cache" / "full_block_copied.py",
                     ["operation_sequences"])
    check = _failed(graded, "operation_sequences")
    wasted = check.kind == "efficiency" and "never a full one" in check.message
    refused = check.kind == "corrupt" and "raised RuntimeError" in check.message
    assert not check.passed and (wasted or refused), (check.kind, check.message)
    assert check.case["operations"].count(";") + 1 < paged_checks.STEPS // 2  # shrunk, not the whole draw


@pytest.mark.slow
def test_a_copy_given_to_the_other_holders_fails_the_operation_sequences(tmp_path):
    """The random sequences judge every append's effect on the other sequences' tables, not only the
    scripted checks: copy-on-write gives the copy to the writer, and the other holders keep theirs."""
    graded = _graded(tmp_path, "paged_kv_cache",
                     SOLUTIONS / "mutants" / "paged_kv_cache" / "writer_keeps_the_block_it_took.py",
                     ["operation_sequences"])
    check = _failed(graded, "operation_sequences")
    assert not check.passed and check.kind == "corrupt", (check.kind, check.message)
    assert "every other holder keeps its table" in check.message


@pytest.mark.slow
def test_a_list_block_table_is_judged_on_its_values_and_caps_at_hire(tmp_path):
    graded = _graded(tmp_path, "paged_kv_cache", SOLUTIONS / "variants" / "paged_kv_cache" / "block_table_list.py",
                     ["returns_arrays", "operation_sequences", "single_sequence"])
    assert [c.id for c in graded.checks if not c.passed] == ["returns_arrays"]
    assert _failed(graded, "returns_arrays").kind == "hygiene"


@pytest.mark.slow
def test_recomputing_the_past_with_the_first_model_object_is_caught(tmp_path):
    graded = _graded(tmp_path, "gpt2_decode",
                     SOLUTIONS / "mutants" / "gpt2_decode" / "recompute_past_first_model.py",
                     ["projects_only_new_tokens"])
    assert not _failed(graded, "projects_only_new_tokens").passed
    assert [d.id for d in graded.diagnoses] == ["recomputes_past"]


@pytest.mark.slow
def test_a_ring_stream_that_goes_wrong_is_shown_shrunk_and_the_rerun_shows_the_same(tmp_path):
    """Issue 21: a stream of a few hundred steps is shown as a short one that fails the same way,
    with the whole streams still naming the mistake, and --check reaches the same case."""
    mutant = SOLUTIONS / "mutants" / "ring_buffer_window" / "window_plus_one.py"
    graded = _graded(tmp_path, "ring_buffer_window", mutant, ["decode_stream", "chunked_stream"])
    for check_id in ("decode_stream", "chunked_stream"):
        check = _failed(graded, check_id)
        assert not check.passed and ["window_off_by_one"] == [n[0] for n in check.named], check.message
        shown, whole = check.message.split(" (shrunk from ")[0], check.message.split(" (shrunk from ")[1]
        fed, drawn = int(shown.split(" fed ")[1].split(" tokens")[0]), int(whole.split(" tokens")[0])
        assert fed < drawn / 4 and check.case["tokens"] == fed, check.message
    (tmp_path / "again").mkdir()
    again = _graded(tmp_path / "again", "ring_buffer_window", mutant, ["decode_stream"])
    assert _failed(again, "decode_stream").message == _failed(graded, "decode_stream").message


# -- round 4, blind set 2: states the random draws rarely reach ----------------------------------


@pytest.mark.slow
def test_an_empty_append_that_copies_a_shared_block_fails_out_of_blocks(tmp_path):
    graded = _graded(tmp_path, "paged_kv_cache", SOLUTIONS / "mutants" / "paged_kv_cache" / "empty_append_copies.py",
                     ["out_of_blocks"])
    check = _failed(graded, "out_of_blocks")
    assert not check.passed and check.kind == "corrupt"
    assert "an append of 0 tokens changes nothing" in check.message


@pytest.mark.slow
def test_a_capacity_test_that_counts_a_full_shared_block_is_refused_exactly_enough(tmp_path):
    graded = _graded(tmp_path, "paged_kv_cache",
                     SOLUTIONS / "mutants" / "paged_kv_cache" / "capacity_counts_full_shared.py", ["out_of_blocks"])
    check = _failed(graded, "out_of_blocks")
    assert not check.passed and "full and shared by a fork" in check.message
    assert "a full shared block is never copied" in check.message


@pytest.mark.slow
def test_a_cache_of_block_inputs_projected_again_is_caught_only_when_every_weight_moves(tmp_path):
    """The wpe probe cannot see it (cached inputs already hold the old embeddings); changing
    every weight between steps does, and the prompt says a step uses the weights it is handed."""
    graded = _graded(tmp_path, "gpt2_decode", SOLUTIONS / "mutants" / "gpt2_decode" / "reprojects_block_inputs.py",
                     ["projects_only_new_tokens", "uses_the_weights_it_is_handed"])
    assert _failed(graded, "projects_only_new_tokens").passed
    check = _failed(graded, "uses_the_weights_it_is_handed")
    assert not check.passed and "projects cached tokens again" in check.message


@pytest.mark.slow
def test_one_softmax_maximum_per_head_gives_nan_when_scores_reach_thousands(tmp_path):
    graded = _graded(tmp_path, "gpt2_decode", SOLUTIONS / "mutants" / "gpt2_decode" / "softmax_max_per_head.py",
                     ["prefill", "large_attention_scores"])
    assert _failed(graded, "prefill").passed  # ordinary weights hide it
    check = _failed(graded, "large_attention_scores")
    assert not check.passed and check.kind == "nan" and "each row's own maximum" in check.message


@pytest.mark.slow
def test_a_memo_that_hands_out_its_own_list_loses_its_answer(tmp_path):
    """The child empties a returned list once sent, as a caller may: a memoised cover comes back empty."""
    graded = _graded(tmp_path, "split_kv_decode",
                     SOLUTIONS / "mutants" / "split_kv_decode" / "cover_memo_handed_out.py",
                     ["split_ranges_rule", "same_answer_in_any_order"])
    check = _failed(graded, "same_answer_in_any_order")
    assert not check.passed and "the grader emptied it" in check.message
    assert graded.level == "weak"
