"""The hidden model of prefix_cache agrees with cases worked out by hand from the contract, each
mistake switch changes exactly what it should, the diagnoses name a mistake from its own trace and
nothing from another's, and the reference (written apart, vLLM-like) agrees with the model on the
grader's own operation sequences."""
import importlib.util
import sys

import numpy as np
import pytest

from grader.catalog import KIT_ROOT
from grader.checking import explain
from grader.hidden.prefix_cache import checks, diagnosis, oracle
from grader.hidden.prefix_cache.checks import add, append, free
from grader.stateful import Op


def _model(nb=6, bs=2, *mistakes):
    return oracle.Model(nb, bs, frozenset(mistakes))


def _run(model, ops):
    return [model.apply(op) for op in ops]


def test_the_worked_example_of_the_prompt():
    m = _model(6, 2)
    assert m.apply(add(1, [1, 2, 3, 4, 5])) == ("ok", 0)
    assert m.observe([1]) == {"free": 3, "cached": 2, "seqs": {1: (5, [0, 1, 2])}}
    assert m.apply(add(2, [1, 2, 3, 4, 9, 9, 9])) == ("ok", 4)
    assert m.block_table(2).tolist() == [0, 1, 3, 4] and m.num_cached_blocks() == 3
    m.apply(append(1, 6))
    assert m.num_cached_blocks() == 4
    m.apply(free(1))
    assert list(m.queue) == [5, 2]
    assert m.apply(add(3, [1, 2, 3, 4, 5, 6, 7])) == ("ok", 6)
    assert m.block_table(3).tolist() == [0, 1, 2, 5] and list(m.queue) == []
    assert m.apply(append(2, 9)) == ("ok", None)
    assert m.apply(append(2, 9)) == ("raises", "RuntimeError")


def test_a_prompt_of_whole_cached_blocks_hits_all_but_its_last_block():
    m = _model(6, 2)
    _run(m, [add(1, [1, 2, 3, 4]), free(1)])
    assert m.apply(add(2, [1, 2, 3, 4])) == ("ok", 2)
    # block 1 holds (3, 4) under the same hash: the new block 2 stays unregistered
    assert m.block_table(2).tolist() == [0, 2] and m.num_cached_blocks() == 2


def test_the_same_tokens_after_another_prefix_are_not_a_hit():
    m = _model(8, 2)
    _run(m, [add(1, [1, 2, 3, 4, 0]), free(1)])
    assert m.apply(add(2, [9, 9, 3, 4, 0])) == ("ok", 0)
    assert m.apply(add(3, [1, 2, 3, 4, 0])) == ("ok", 4)


def test_free_sends_the_tail_back_first_and_a_shared_block_stays_held():
    m = _model(6, 2)
    _run(m, [add(1, [1, 2, 3, 4, 5, 6]), add(2, [1, 2, 3, 4, 7])])  # 2 shares blocks 0, 1 and takes 3
    m.apply(free(1))
    assert list(m.queue) == [4, 5, 2]  # only block 2 lost its last holder
    m.apply(free(2))
    assert list(m.queue) == [4, 5, 2, 3, 1, 0]


def test_a_hit_leaves_the_queue_from_the_middle_and_keeps_its_registration():
    m = _model(5, 2)
    _run(m, [add(1, [1, 2, 3]), free(1)])  # queue [2, 3, 4, 1, 0]
    assert m.apply(add(2, [1, 2, 8])) == ("ok", 2)
    assert m.block_table(2).tolist() == [0, 2] and list(m.queue) == [3, 4, 1]


def test_running_out_counts_the_hits_waiting_in_the_queue():
    m = _model(3, 2)
    _run(m, [add(1, [1, 2, 3, 4]), free(1)])  # queue [2, 1, 0], blocks 0 and 1 registered
    before = m.observe([2])
    # hits block 0 (waiting); needs 3 more blocks, the queue holds 2 others
    assert m.apply(add(2, [1, 2, 5, 5, 5, 5, 5])) == ("raises", "RuntimeError")
    assert m.observe([2]) == before and list(m.queue) == [2, 1, 0]
    assert m.apply(add(2, [1, 2, 5, 5, 5])) == ("ok", 2)


def test_taking_a_registered_block_evicts_it():
    m = _model(2, 2)
    _run(m, [add(1, [1, 2]), free(1)])
    assert m.num_cached_blocks() == 1
    _run(m, [add(2, [7, 7]), add(3, [8, 8])])  # takes block 1, then block 0 (registered)
    assert m.num_cached_blocks() == 2  # (7, 7) and (8, 8); (1, 2) was evicted
    _run(m, [free(2), free(3)])
    assert m.apply(add(4, [1, 2, 0])) == ("ok", 0)


def test_invalid_calls_raise_value_error_and_change_nothing():
    m = _model(4, 2)
    m.apply(add(1, [1, 2, 3]))
    before = m.observe([1, 2])
    for op in [add(1, [1]), add(2, []), add(2, [1, -1]), append(2, 1), append(1, -3), free(2),
               add(2, np.array([[1, 2]]))]:
        assert m.apply(op) == ("raises", "ValueError"), op
        assert m.observe([1, 2]) == before
    with pytest.raises(oracle.Refused):
        oracle.Model(0, 2)


DIFFERS = {"unchained_hash": ("ok", 0), "parent_from_registration": ("ok", 0), "last_token_served": ("ok", 2)}


def test_every_switch_has_a_witness():
    assert set(checks.WITNESSES) == set(oracle.MISTAKES)


@pytest.mark.parametrize("switch, ops", checks.WITNESSES.items())
def test_each_switch_changes_the_trace_where_its_mistake_shows(switch, ops):
    differs = DIFFERS.get(switch)
    sizes = (4, 2)
    right, wrong = diagnosis.replay(sizes, ops), diagnosis.replay(sizes, ops, frozenset([switch]))
    assert right[:-1] == wrong[:-1] and right[-1] != wrong[-1]
    if differs is not None:
        assert right[-1][0] == differs


def test_a_stale_registration_serves_a_block_that_holds_other_tokens():
    ops = [add(1, [1, 2]), free(1), add(2, [7] * 8), free(2), add(3, [1, 2, 0])]
    assert diagnosis.replay((4, 2), ops)[-1][0] == ("ok", 0)
    assert diagnosis.replay((4, 2), ops, frozenset(["stale_registration"]))[-1][0] == ("ok", 2)


def _trace_of(switch, sizes, ops):
    return diagnosis.replay(sizes, ops, frozenset([switch]) if switch else frozenset())


@pytest.mark.parametrize("switch, named", [(s, d) for d, ways in diagnosis.WAYS.items() for s in ways])
def test_a_mistakes_own_trace_names_it_and_no_other(switch, named):
    rng = np.random.default_rng(7)
    sizes = (6, 2)
    cases = []
    for _ in range(60):  # the grader's own draws, cut at the first operation the mistake gets wrong
        ops = checks.Drawer(rng, sizes).sequence(30)
        right, wrong = _trace_of(None, sizes, ops), _trace_of(switch, sizes, ops)
        cut = next((i for i, (a, b) in enumerate(zip(right, wrong)) if a != b), None)
        if cut is not None:
            cases.append(((sizes, tuple(ops[:cut + 1])), wrong[:cut + 1]))
    assert cases, f"no draw shows {switch}"
    found = explain(diagnosis.VARIANTS, cases, same=lambda got, want, case: got == want)
    assert [i for i, _ in found.named] == [named]


def test_a_trace_no_mistake_makes_names_nothing():
    sizes = (4, 2)
    ops = (add(1, [1, 2, 3]),)
    odd = [(("ok", 0), {"free": 1, "cached": 1, "seqs": {1: (3, [3, 2])}})]  # blocks from the back
    assert explain(diagnosis.VARIANTS, [((sizes, ops), odd)], same=lambda g, w, c: g == w).named == []


def _load(path, name):
    """A kit module by path under its own name (the reference, a mutant, the driver), with the
    exercise's helpers importable."""
    sys.path.insert(0, str(KIT_ROOT / "exercises" / "prefix_cache"))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        del sys.path[0]
    return module


def _reference():
    return _load(KIT_ROOT / "solutions" / "prefix_cache.py", "_prefix_cache_reference")


def _driver():
    return _load(KIT_ROOT / "exercises" / "prefix_cache" / "prefix_driver.py", "_prefix_driver")


def test_the_driver_reports_a_prompt_the_cache_changed_later():
    driver = _driver()
    mutant = _load(KIT_ROOT / "solutions" / "mutants" / "prefix_cache" / "keeps_callers_prompt.py", "_keeps")
    for module, changed in ((_reference(), []), (mutant, [0])):
        cache = module.PrefixCache(4, 2)
        assert driver.step(cache, "add_request", [1, [5, 6, 7]], [1])[0] == ["ok", 0]
        reply = driver.step(cache, "append_token", [1, 8], [1])
        assert reply[4] == changed


def test_a_cache_s_first_step_starts_its_own_record_of_prompts():
    """A new cache may reuse the id of one already gone: its first step must not inherit the old
    cache's prompts (the grader once read a changed-prompt index past the sequence it played)."""
    driver = _driver()
    mutant = _load(KIT_ROOT / "solutions" / "mutants" / "prefix_cache" / "keeps_callers_prompt.py", "_keeps")
    cache = mutant.PrefixCache(8, 2)
    driver.step(cache, "add_request", [1, [5, 6, 7]], [1], first=True)
    driver.step(cache, "append_token", [1, 8], [1])  # the mutant appended to the caller's list
    cache.free(1)
    reply = driver.step(cache, "add_request", [2, [1, 2]], [2], first=True)  # as a new cache with the same id
    assert reply[4] == []


def test_the_driver_overwrites_prompts_and_tables_it_hands_over():
    driver, cache = _driver(), _reference().PrefixCache(4, 2)
    prompt = np.array([5, 6, 7], np.int16)
    reply = driver.step(cache, "add_request", [1, prompt], [1], overwrite=True)
    assert prompt.tolist() == [6, 7, 8]  # the caller reused its buffer
    assert reply[3][0][2][1].tolist() == [0, 1]  # the answer as given, before the write into it
    cache.append_token(1, 8)
    cache.free(1)
    assert cache.add_request(2, [5, 6, 7, 8, 9]) == 4  # the cache hashed its own copy


@pytest.mark.parametrize("sizes", [(5, 2), (9, 3), (7, 1), (12, 4)])
def test_the_reference_agrees_with_the_model_on_the_graders_sequences(sizes):
    PrefixCache = _reference().PrefixCache
    rng = np.random.default_rng(sizes[0])
    for _ in range(15):
        drawer = checks.Drawer(rng, sizes)
        ops = drawer.chat(1, 2) + drawer.sequence(40)
        model, cache = oracle.Model(*sizes), PrefixCache(*sizes)
        for op in ops:
            want = model.apply(op)
            try:
                got = ("ok", getattr(cache, op.name)(*op.args))
            except (ValueError, RuntimeError) as exc:
                got = ("raises", type(exc).__name__)
            assert got == (want if op.name == "add_request" else (want[0], want[1] if want[0] == "raises" else None))
            assert cache.num_free_blocks() == model.num_free_blocks()
            assert cache.num_cached_blocks() == model.num_cached_blocks()
            for s in model.seqs:
                assert cache.block_table(s).tolist() == model.block_table(s).tolist()


def test_operations_show_their_arguments_briefly():
    assert str(add(3, [1, 2])) == "add_request(3, [1, 2])"
    assert str(add(3, np.arange(40))).startswith("add_request(3, int64 array [40 tokens: 0, 1, 2")
    assert str(Op("free", (2,))) == "free(2)"


def test_two_mistakes_at_once_are_both_named():
    rng, sizes, cases = np.random.default_rng(3), (6, 2), []
    both = frozenset(["unchained_hash", "head_first_free"])
    for _ in range(40):
        drawer = checks.Drawer(rng, sizes)
        ops = drawer.chat(1, 2) + drawer.sequence(30)
        right, wrong = _trace_of(None, sizes, ops), diagnosis.replay(sizes, ops, both)
        cut = next((i for i, (a, b) in enumerate(zip(right, wrong)) if a != b), None)
        if cut is not None:
            cases.append(((sizes, tuple(ops[:cut + 1])), wrong[:cut + 1]))
    assert sorted(i for i, _ in diagnosis.explain_sequences(cases).named) == ["eviction_order", "unchained_hash"]
