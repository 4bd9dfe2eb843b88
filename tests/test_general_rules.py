"""The general rules of CONTRACT section 1 (ownership, calls in any order, signed integer types),
checked for every exercise by one mechanism: probes in the child, checks in grader/hidden/_general.py.

Real submissions (the reference with one mistake written in) graded through the engine, at the
default isolation level, plus the pieces that need no child.
"""
from pathlib import Path

import numpy as np
import pytest

from grader import catalog, engine
from grader.checking import binding
from grader.checklist import ARRAY_RULES, general_checks, takes_scalars_only
from grader.hidden import _general
from grader.plugin import GENERAL_IDS
from grader.sandbox import ModuleToLoad, Sandbox

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"
GENERAL = ["leaves_arguments_unchanged", "results_belong_to_the_caller", "same_answer_in_any_order",
           "refuses_in_any_order", "answers_arrays_as_they_are_now", "read_only_arguments", "any_signed_integer_type",
           "arguments_bound_either_way"]


def _submission(tmp_path: Path, exercise: str, old: str = "", new: str = "", extra: str = "") -> Path:
    source = (SOLUTIONS / f"{exercise}.py").read_text()
    assert old in source, "the mistake must be written into the reference"
    (tmp_path / f"{exercise}.py").write_text(source.replace(old, new, 1) + extra)
    return tmp_path


def _graded(path: Path, exercise: str, only=None):
    result = engine.grade(path, [exercise], seed=7, only_checks=only).exercise(exercise)
    return result, {c.id: c for c in result.checks}


def test_every_exercise_lists_the_general_checks_after_its_own_and_rubrics_need_not_name_them():
    for ex in catalog.exercises():
        applicable = [c for c in GENERAL if c in general_checks(ex.stub_path)]
        assert list(ex.checks)[-len(applicable):] == applicable
        assert not set(GENERAL) & ex.check_ids  # they cap by failure kind alone
    assert set(general_checks()) == set(GENERAL) == GENERAL_IDS
    assert all(general_checks().values()), "each has a first docstring line to show a candidate"


def test_rules_about_array_arguments_leave_out_exercises_that_take_scalars_only(tmp_path):
    """decode_mask and tile_classification take ints only: the rules about changing, rewriting or read-only array
    arguments could only pass there, so they are not listed, run or counted; every other exercise gets them. An
    unannotated parameter, or any type but int, float, bool, str and None, may be an array."""
    scalar_only = {ex.id for ex in catalog.exercises() if not set(ARRAY_RULES) & set(ex.checks)}
    assert scalar_only == {"decode_mask", "tile_classification"}
    for source, scalars in (("def f(T: int, S: int, w: int | None = None) -> object: ...", True),
                            ("class C:\n    def m(self, x: float, flag: bool = False): ...", True),
                            ("def f(T: int, S): ...", False), ("def f(x: 'np.ndarray'): ...", False),
                            ("def f(xs: list[int]): ...", False), ("def f(*sizes: int): ...", False)):
        stub = tmp_path / f"stub{len(list(tmp_path.iterdir()))}.py"
        stub.write_text(source + "\n")
        assert takes_scalars_only(stub) == scalars, source


@pytest.mark.slow
def test_a_scalar_only_exercise_runs_and_counts_exactly_the_checks_it_lists(submission):
    """What `show --checks` lists is what a grading runs, counts and reports, for an exercise the array rules skip."""
    reference = (catalog.KIT_ROOT / "solutions" / "tile_classification.py").read_text()
    result, checks = _graded(submission({"tile_classification.py": reference}), "tile_classification")
    assert list(checks) == list(catalog.get("tile_classification").checks) and not set(ARRAY_RULES) & set(checks)


@pytest.mark.slow
def test_the_reference_passes_every_general_check(tmp_path):
    result, checks = _graded(_submission(tmp_path, "tree_mask"), "tree_mask")
    assert [checks[c].passed for c in GENERAL] == [True] * len(GENERAL), [checks[c].message for c in GENERAL]
    assert result.level == "strong_hire"


@pytest.mark.slow
def test_an_argument_changed_in_place_caps_at_hire(tmp_path):
    path = _submission(tmp_path, "tree_mask", "    on_path = _ancestry(_validated(parents, P))  # [T, T]\n",
                       "    on_path = _ancestry(_validated(parents, P))  # [T, T]\n"
                       "    if isinstance(parents, np.ndarray):\n        parents.sort()\n")
    result, checks = _graded(path, "tree_mask")
    failed = checks["leaves_arguments_unchanged"]
    assert not failed.passed and failed.kind == "hygiene"
    assert failed.message.startswith("tree_attention_mask(int") and "changed its argument 1" in failed.message
    assert result.level == "hire"


@pytest.mark.slow
def test_writing_into_an_argument_and_putting_it_back_fails_on_a_read_only_one_and_caps_at_hire(tmp_path):
    """Blind set 5: roots' -1 swapped for a sentinel in the caller's array to save a copy, then restored:
    no digest sees it, a read-only parents array does."""
    path = _submission(tmp_path, "tree_mask", "    on_path = _ancestry(_validated(parents, P))  # [T, T]\n",
                       "    if isinstance(parents, np.ndarray) and parents.size:\n"
                       "        roots = parents == -1\n        parents[roots] = 0\n        parents[roots] = -1\n"
                       "    on_path = _ancestry(_validated(parents, P))  # [T, T]\n")
    result, checks = _graded(path, "tree_mask")
    failed = checks["read_only_arguments"]
    assert not failed.passed and failed.kind == "hygiene" and "writes into its arguments" in failed.message
    assert result.level == "hire", [(c.id, c.message) for c in result.checks if not c.passed]


@pytest.mark.slow
def test_an_answer_that_assumes_c_order_fails_on_the_layouts_any_check_sends(tmp_path):
    """Blind set 5: masked_softmax writing through ``out.reshape(-1, S)`` of ``zeros_like(scores)``, a copy
    when scores come in Fortran order or reversed, so the caller gets zeros."""
    source = (SOLUTIONS / "variants" / "nan_safe_softmax" / "row_loops.py").read_text()
    assert 'order="C"' in source
    (tmp_path / "nan_safe_softmax.py").write_text(source.replace('np.zeros_like(scores, order="C")',
                                                                 "np.zeros_like(scores)"))
    result, _ = _graded(tmp_path, "nan_safe_softmax")
    assert result.level == "weak" and any(c.kind == "wrong" for c in result.checks if not c.passed)


@pytest.mark.slow
def test_a_memo_consulted_before_validation_answers_a_refused_call_after_its_twin_and_caps_at_hire(tmp_path):
    """Blind set 5: the memo lookup sits in front of the validation, and P = 4.0 hashes as 4 does."""
    memo = ("\n_seen = {}\n_plain = tree_positions\n\n"
            "def tree_positions(parents, P):\n"
            "    key = (tuple(int(p) for p in parents), P)\n"
            "    if key not in _seen:\n        _seen[key] = _plain(parents, P)\n"
            "    return _seen[key].copy()\n")
    result, checks = _graded(_submission(tmp_path, "tree_mask", extra=memo), "tree_mask")
    failed = checks["refuses_in_any_order"]
    assert not failed.passed and failed.kind == "hygiene" and "4.0" in failed.message, failed.message
    assert result.level == "hire", [(c.id, c.message) for c in result.checks if not c.passed]


@pytest.mark.slow
def test_a_buffer_kept_in_the_dtype_of_the_first_call_is_caught(tmp_path):
    """Blind set 5: work done in the dtype of the module's very first call; varlen's checks start in
    float64, so only a fresh process whose first calls are float32 shows it."""
    first = ("\n_first = []\n_plain = varlen_attention\n\n"
             "def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k):\n"
             "    _first.append(_first[0] if _first else np.asarray(q).dtype)\n"
             "    q, k, v = (np.asarray(x).astype(_first[0]) for x in (q, k, v))\n"
             "    return _plain(q, k, v, cu_seqlens_q, cu_seqlens_k).astype(np.float64)\n")
    result, checks = _graded(_submission(tmp_path, "varlen_attention", extra=first), "varlen_attention")
    failed = checks["same_answer_in_any_order"]
    assert not failed.passed and "first calls were in float32" in failed.message, failed.message
    assert result.level == "weak"


@pytest.mark.slow
def test_a_memo_handed_out_writable_is_caught(tmp_path):
    memo = ("\n_memo = {}\n_plain = tree_attention_mask\n\n"
            "def tree_attention_mask(parents, P):\n"
            "    key = (tuple(int(p) for p in parents), int(P))\n"
            "    if key not in _memo:\n        _memo[key] = _plain(parents, P)\n"
            "    return _memo[key]\n")
    result, checks = _graded(_submission(tmp_path, "tree_mask", extra=memo), "tree_mask")
    assert not checks["same_answer_in_any_order"].passed
    assert result.level == "weak"


def _memoised_mask(tmp_path, read_only: bool) -> Path:
    """decode_mask's reference behind a memo that hands out its own array (writable or read-only)."""
    memo = ("\nimport functools\n_plain = decode_causal_mask\n\n"
            "@functools.lru_cache(maxsize=None)\n"
            "def _cached(T, S):\n    mask = _plain(T, S)\n"
            f"    mask.flags.writeable = {not read_only}\n    return mask\n\n"
            "def decode_causal_mask(T, S):\n"
            "    if isinstance(T, bool) or isinstance(S, bool):\n        raise ValueError('not an int')\n"
            "    return _cached(T, S) if type(T) is int and type(S) is int else _plain(T, S)\n")
    return _submission(tmp_path, "decode_mask", extra=memo)


def test_a_memo_handing_back_the_array_the_caller_wrote_is_named_as_such_and_no_mistake_is_guessed(tmp_path):
    """The probe writes over a writable result, as a caller may; a memo then answers with that write, which
    can look like any classic mistake (an inverted mask fits 'self excluded' at T = S = 1). The reply that
    hands the array back is flagged, results_belong_to_the_caller says so, and no mistake is named."""
    result, checks = _graded(_memoised_mask(tmp_path, read_only=False), "decode_mask")
    assert result.level == "weak" and not result.diagnoses, [d.id for d in result.diagnoses]
    belongs = checks["results_belong_to_the_caller"]
    assert not belongs.passed and "handed back the writable array" in belongs.message, belongs.message
    wrong = [c for c in result.checks if not c.passed and c.kind == "wrong" and c.id != belongs.id]
    assert wrong and any("no mistake named" in c.message for c in wrong), [c.message for c in wrong]


def test_a_memo_handing_out_read_only_arrays_is_fine(tmp_path):
    result, checks = _graded(_memoised_mask(tmp_path, read_only=True), "decode_mask")
    assert checks["results_belong_to_the_caller"].passed, checks["results_belong_to_the_caller"].message
    assert not result.diagnoses and all(c.passed for c in result.checks if c.id in GENERAL), \
        [(c.id, c.message) for c in result.checks if not c.passed]


@pytest.mark.slow
def test_a_reused_output_buffer_is_a_result_that_changes(tmp_path):
    reuse = ("\n_out = {}\n_fresh = tree_positions\n\n"
             "def tree_positions(parents, P):\n"
             "    got = _fresh(parents, P)\n"
             "    buf = _out.setdefault(len(got), np.empty(len(got), np.int64))\n"
             "    buf.flags.writeable = True\n    buf[:] = got\n    buf.flags.writeable = False\n    return buf\n")
    result, checks = _graded(_submission(tmp_path, "tree_mask", extra=reuse), "tree_mask")
    moved = checks["results_belong_to_the_caller"]
    assert not moved.passed and moved.kind == "wrong" and "changed during a later call" in moved.message
    assert result.level == "weak"


@pytest.mark.slow
def test_a_narrow_integer_dtype_read_as_int64_is_wrong(tmp_path):
    path = _submission(tmp_path, "tree_mask", "    array = np.asarray(parents)\n",
                       "    array = np.asarray(parents)\n"
                       "    if array.dtype.kind == 'i':\n        array = array.view(np.int64)  # no copy\n")
    _, checks = _graded(path, "tree_mask")
    failed = checks["any_signed_integer_type"]
    assert not failed.passed and failed.kind in ("wrong", "hygiene", "crash")
    assert "int8" in failed.message or "int16" in failed.message or "int32" in failed.message


@pytest.mark.slow
def test_a_general_check_reruns_alone_with_the_same_verdict(tmp_path):
    path = _submission(tmp_path, "tree_mask", "    on_path = _ancestry(_validated(parents, P))  # [T, T]\n",
                       "    on_path = _ancestry(_validated(parents, P))  # [T, T]\n"
                       "    if isinstance(parents, np.ndarray):\n        parents.sort()\n")
    _, checks = _graded(path, "tree_mask", only={"leaves_arguments_unchanged"})
    assert list(checks) == ["leaves_arguments_unchanged"]
    assert not checks["leaves_arguments_unchanged"].passed


@pytest.mark.slow
def test_a_reply_without_its_probe_is_a_failure_never_a_pass(tmp_path):
    forge = ("\n_Host = next(c for c in object.__subclasses__() if c.__name__ == 'Host')\n_send = _Host.send\n\n"
             "def _quiet(self, header, arrays=()):\n    header.pop('probe', None)\n"
             "    return _send(self, header, arrays)\n\n_Host.send = _quiet\n")
    result, checks = _graded(_submission(tmp_path, "tree_mask", extra=forge), "tree_mask")
    for check in ("leaves_arguments_unchanged", "results_belong_to_the_caller"):
        assert not checks[check].passed and checks[check].kind == "crash"
        assert "lacked the probe" in checks[check].message
    assert result.level == "weak"


# -- pieces that need no grading run --------------------------------------------------------------


def test_integers_are_retyped_to_the_narrowest_signed_dtype_that_holds_them():
    args = (np.array([-1, 0, 1, 120]), 7, [3, 4], (np.int64(5), 2.5, True))
    assert _general._widest(args) == 120
    dtype = _general._narrowest(_general._widest(args))
    assert dtype is np.int8
    retyped = _general._retyped(args, dtype)
    assert retyped[0].dtype == np.int8 and type(retyped[1]) is np.int8
    assert retyped[2].dtype == np.int8 and retyped[2].tolist() == [3, 4]  # an index list as an array
    assert type(retyped[3][0]) is np.int8 and retyped[3][1] == 2.5 and retyped[3][2] is True
    assert _general._narrowest(_general._widest([np.array([-129])])) is np.int16
    each = _general._retyped_each(([5, 300, 2**40], 7, 2**40))  # a list of numpy ints, each its own dtype
    assert [type(v) for v in each[0]] == [np.int8, np.int16, np.int64] and each[0] == [5, 300, 2**40]
    assert type(each[1]) is np.int8 and type(each[2]) is int


def test_answers_compare_by_structure_exact_integers_and_floats_within_precision():
    same = _general._same
    x = np.linspace(-3, 3, 7)
    assert same((x, np.arange(3)), (x + 1e-15, np.arange(3)), [x])
    assert not same((x, np.arange(3)), (x + 1e-6, np.arange(3)), [x])
    assert not same([np.arange(3)], (np.arange(3),), [])
    assert not same(np.array([True, False]), np.array([True, True]), [])
    assert same(np.array([np.nan, -np.inf]), np.array([np.nan, -np.inf]), [])


ECHO = b"""
import numpy as np
_kept = np.zeros(4)

def scale(x, factor):
    x *= factor
    return x.sum()

def kept():
    return _kept

def kept_read_only():
    out = _kept.view()
    out.flags.writeable = False
    return out
"""


@pytest.mark.slow
def test_the_child_reports_changed_arguments_and_scribbles_only_writable_results():
    sandbox = Sandbox(ModuleToLoad("echo", [("echo.py", ECHO)], []))
    try:
        sandbox.module.scale(np.ones(3), 2.0)
        assert sandbox.ownership.changed[0][1] == ["0"]
        assert not sandbox.module.kept_read_only().any()
        first = sandbox.module.kept()
        assert not first.any()
        assert np.isnan(sandbox.module.kept()).all(), "the first result was scribbled once sent"
        assert sandbox.ownership.unreported == [] and sandbox.ownership.probed == 4
    finally:
        sandbox.close()


ALIAS = b"""
import numpy as np
_kept = []

def keep(x):
    _kept.append(x)
    return len(_kept)

def keep_copy(x):
    _kept.append(list(x))
    return len(_kept)

def keep_view(x):
    _kept.append(x[::-1].T)
    return len(_kept)

def grow():
    for x in _kept:
        x.append(0) if isinstance(x, list) else x.__setitem__(0, 9.0)
    return len(_kept)

def identity(x):
    return x

def let_go():
    _kept.clear()
    return 0
"""


@pytest.mark.slow
def test_the_child_reports_an_argument_kept_by_reference_that_a_later_call_changes():
    sandbox = Sandbox(ModuleToLoad("alias", [("alias.py", ALIAS)], []))
    try:
        m, own = sandbox.module, sandbox.ownership
        m.keep_copy([4, 5])
        m.grow()
        assert own.aliased == [], "a copy the candidate keeps is its own to change"
        m.keep([1, 2, 3])
        m.grow()
        assert [(label, later) for _, label, later in own.aliased] == [("0", "grow()")]
        assert own.aliased[0][0].startswith("keep(")
        m.let_go()
        kept = np.zeros(3)
        assert m.identity(kept) is not None  # handed back: the caller's from now on, not watched
        m.grow()
        assert len(own.aliased) == 1 and own.changed == [] and own.unreported == []
        m.let_go()
        m.keep_view(np.zeros((2, 3)))  # a view, not the argument: it holds the memory the argument came in
        m.grow()
        assert [(label, later) for _, label, later in own.aliased[1:]] == [("0", "grow()")]
        assert own.aliased[1][0].startswith("keep_view(")
    finally:
        sandbox.close()


@pytest.mark.slow
def test_a_cache_that_keeps_the_callers_arrays_is_blamed_for_that_not_for_what_the_grader_wrote(tmp_path):
    """A ring that keeps views of the caller's k and v fails keeps_its_own_copy; when the grader (as the
    caller) rewrites those arrays between calls, no later call of the candidate's is said to have changed
    them (fe61769 blamed RingKVCache(1, 3) in leaves_arguments_unchanged)."""
    mutant = SOLUTIONS / "mutants" / "ring_buffer_window" / "defers_writes_by_reference.py"
    (tmp_path / "ring_buffer_window.py").write_text(mutant.read_text())
    _, checks = _graded(tmp_path, "ring_buffer_window")
    assert not checks["keeps_its_own_copy"].passed
    assert checks["leaves_arguments_unchanged"].passed, checks["leaves_arguments_unchanged"].message


def test_kept_arguments_are_forgotten_once_the_candidate_lets_go():
    """In-process: the probe holds an argument only while candidate code holds it too."""
    import sys
    sys.path.insert(0, str(Path(_general.__file__).parents[1] / "sandbox"))
    try:
        from child import Probes
    finally:
        sys.path.pop(0)
    probes, store = Probes(set()), []
    for n, keep in enumerate([True, False]):
        args = [[n, n + 1]]
        before = probes.before(args, {})
        if keep:
            store.append(args[0])
        probes.report(before, args, {}, n)
        del args
    assert [e[0] for e in probes.kept] == [0], "only the argument the candidate kept is watched"
    store[0].append(6)  # between calls: the caller's change (lent memory the grader rewrites), no call's
    before = probes.before([], {})
    assert probes.report(before, [], {}, 2)["aliased"] == [], "a change made between calls blames no call"
    before = probes.before([], {})
    store[0].append(7)  # during the call
    assert probes.report(before, [], {}, 2)["aliased"] == [[0, "0"]]
    store.clear()
    assert len(probes.prune()) == 0
    args = [np.frombuffer(bytearray(48), dtype=np.float64).reshape(2, 3)]  # as the wire builds one
    before = probes.before(args, {})
    store.append(args[0][1:].T)
    probes.report(before, args, {}, 3)
    del args
    assert [e[0] for e in probes.prune()] == [3], "a view kept of an argument keeps it watched"
    store.clear()
    assert len(probes.prune()) == 0


def test_each_exercise_s_integer_edges_reach_the_top_of_their_narrowest_dtype():
    """Each edge reaches the top of its widest int's narrowest dtype, or puts a small int (retyped alone to
    its own narrowest dtype) beside one that dtype cannot hold."""
    found = 0
    for ex in catalog.exercises():
        module = __import__(f"grader.hidden.{ex.id}.checks", fromlist=["checks"])
        for name, args, kwargs in getattr(module, "integer_edges", lambda: [])():
            widest = _general._widest((args, kwargs))
            at_the_top = widest >= 0.9 * np.iinfo(_general._narrowest(widest)).max
            small = (np.iinfo(_general._narrowest(abs(n))).max for n in _general._ints((args, kwargs)))
            beside = any(widest > top for top in small)
            assert at_the_top or beside, (ex.id, name, args)
            found += 1
    assert found >= 20


@pytest.mark.slow
def test_a_cache_keyed_on_part_of_the_arguments_is_caught_in_a_fresh_process(tmp_path):
    """Scaled keys kept per chunk shape: the value checks never call twice with one shape, but a
    fresh process answers new arguments of a recorded shape without the stale keys."""
    path = _submission(tmp_path, "nan_safe_softmax",
                       "    s = (q @ k.T) * (1.0 / math.sqrt(D))  # scaled scores",
                       "    key = (k.shape, k.dtype.str)\n"
                       "    s = q @ _SCALED.setdefault(key, k.T * (1.0 / math.sqrt(D)))  # scaled scores",
                       "\n_SCALED = {}\n")
    _, checks = _graded(path, "nan_safe_softmax")
    failed = checks["same_answer_in_any_order"]
    assert not failed.passed and failed.kind == "wrong" and "in a fresh process" in failed.message


@pytest.mark.parametrize("type_name, kind", [("ValueError", "hygiene"), ("TypeError", "hygiene"),
                                             ("KeyError", None), ("AttributeError", None)])
def test_one_rule_for_numpy_integers_refused_in_every_exercise(type_name, kind):
    """A type check too strict (ValueError or TypeError on a numpy int) is hygiene wherever it is
    met; any other exception on a valid input propagates, to count as a crash."""
    from grader.checking import CheckFailure, other_argument_types
    from grader.sandbox import CandidateRaised, Limits

    raised = CandidateRaised("f(np.int64(3))", {"type": type_name, "mro": [type_name, "Exception"],
                                                "message": "want int"}, Limits())
    with pytest.raises(CheckFailure if kind else CandidateRaised) as caught:
        with other_argument_types("f rejected a numpy integer"):
            raise raised
    if kind:
        assert caught.value.kind == kind and caught.value.message.startswith("f rejected a numpy integer")


@pytest.mark.slow
def test_numpy_integers_refused_by_a_type_check_cap_at_hire_where_checks_passed_them_to_value_calls(tmp_path):
    """split_kv's value checks once passed numpy sizes, so a TypeError there was a crash (weak) while
    decode_mask called the same slip hire. Now only the integer-type checks give numpy ints."""
    refuse = "    S, num_splits = operator.index(S), operator.index(num_splits)\n"
    path = _submission(tmp_path, "split_kv_decode", refuse,
                       "    if type(S) is not int or type(num_splits) is not int:\n"
                       "        raise TypeError('S and num_splits must be Python ints')\n"
                       "    S, num_splits = operator.index(S), operator.index(num_splits)\n")
    result, checks = _graded(path, "split_kv_decode")
    failed = [c for c in checks.values() if not c.passed]
    assert {c.kind for c in failed} == {"hygiene"}, [c.message for c in failed]
    assert "any_signed_integer_type" in checks and not checks["any_signed_integer_type"].passed
    assert result.level == "hire"


@pytest.mark.slow
def test_a_list_refused_inside_a_value_check_is_a_slip_and_the_values_are_still_judged(tmp_path):
    """split_kv's value checks send positions as lists for one split count: an answer that only
    takes arrays (TypeError on a list) is hire there, as in ring's or fused's own type checks."""
    refuse = "def split_kv_attention(q, k, v, q_positions, k_positions, num_splits):\n"
    guard = (refuse + "    if isinstance(q_positions, list) or isinstance(k_positions, list):\n"
             "        raise TypeError('positions must be numpy arrays')\n")
    path = _submission(tmp_path, "split_kv_decode", refuse, guard)
    result, checks = _graded(path, "split_kv_decode")
    failed = {c.id: c for c in checks.values() if not c.passed}
    assert {"split_kv_contiguous", "split_kv_long_context"} <= set(failed), [c.message for c in failed.values()]
    assert all(c.kind == "hygiene" and "TypeError" in c.message for c in failed.values())
    assert result.level == "hire"


@pytest.mark.slow
def test_a_ring_step_kept_in_the_first_steps_dtype_fails_the_float32_first_check(tmp_path):
    """Blind set 5: one score workspace shared by every cache, in the dtype of the module's first step;
    ring's first check runs a float32 cache before float64 ones."""
    first = ("\n_first = []\n_plain = windowed_attention_step\n\n"
             "def windowed_attention_step(cache, q, k, v, window):\n"
             "    _first.append(_first[0] if _first else np.asarray(q).dtype)\n"
             "    q = np.asarray(q).astype(_first[0])\n"
             "    return _plain(cache, q, k, v, window)\n")
    result, checks = _graded(_submission(tmp_path, "ring_buffer_window", extra=first), "ring_buffer_window")
    assert not checks["float32_cache_first"].passed and result.level == "weak"


@pytest.mark.slow
def test_a_kernel_writing_into_the_lent_kv_positions_changes_an_argument_and_caps_at_hire(tmp_path):
    """Blind set 5: INT64_MAX written into the caller's kv.positions as a sentinel (the values stay right).
    A KV source the grader lends is an argument: its public attributes are digested like a kit object's."""
    path = _submission(tmp_path, "fused_attention", "    k_positions = np.asarray(kv.positions)\n",
                       "    k_positions = np.asarray(kv.positions)\n"
                       "    if isinstance(kv.positions, np.ndarray) and kv.positions.flags.writeable:\n"
                       "        kv.positions[k_positions < 0] = np.iinfo(np.int64).max\n"
                       "        k_positions = np.where(k_positions == np.iinfo(np.int64).max, -1, k_positions)\n")
    for sibling in ("nan_safe_softmax.py", "tile_classification.py"):
        (tmp_path / sibling).write_text((SOLUTIONS / sibling).read_text())
    result, checks = _graded(path, "fused_attention")
    assert not checks["leaves_arguments_unchanged"].passed and checks["leaves_arguments_unchanged"].kind == "hygiene"
    assert result.level == "hire", [(c.id, c.message) for c in result.checks if not c.passed]


@pytest.mark.slow
def test_a_parameter_the_stub_annotates_float_is_never_retyped_to_a_numpy_integer(monkeypatch):
    """Red team 18: rope(x, positions, base=10) replayed as rope(x, int16 positions, np.int16(10)) graded hire a
    correct answer that takes base as a Python number only (a numpy integer is no float). Positions are still
    retyped; base stays as first given."""
    from types import SimpleNamespace

    from grader.checking import CheckFailure

    variant = SOLUTIONS / "variants" / "rope_cache" / "base_python_numbers_only.py"
    exercise = catalog.get("rope_cache")
    assert _general._float_parameters(exercise.stub_path, "rope") == {2, "base"}
    assert _general._float_parameters(exercise.stub_path, "RopeKVCache") == {2, "base"}
    sandbox = Sandbox(ModuleToLoad("rope_cache", [("rope_cache.py", variant.read_bytes())], []))
    try:
        ex = SimpleNamespace(candidate=sandbox.module, exercise=exercise)
        x, positions = np.linspace(-1, 1, 5 * 2 * 4).reshape(5, 2, 4), np.array([3, 0, 9, 4, 7])
        want = sandbox.module.rope(x, positions, 10)
        for retype in (_general._retyped_alike, _general._retyped_each):
            _general._expect_same_retyped(ex, "rope", (x, positions, 10), {}, want, "Python ints", retype)
        monkeypatch.setattr(_general, "_float_parameters", lambda stub, name: frozenset())  # what the rule once did
        with pytest.raises(CheckFailure, match=r"np\.int8\(10\)"):
            _general._expect_same_retyped(ex, "rope", (x, positions, 10), {}, want, "Python ints",
                                          _general._retyped_alike)
    finally:
        sandbox.close()


def _stub_function(exercise: str, name: str):
    namespace: dict = {}
    exec(compile(catalog.get(exercise).stub_path.read_text(), exercise, "exec"), namespace)  # the kit's own stub
    return namespace[name]


@pytest.mark.parametrize("exercise, name, args, kwargs", [
    ("tile_classification", "classify_tiles", (1, 97, 4, 10), {"window": 9}),
    ("tile_classification", "classify_tiles", (5, 20, 2, 4), {}),
    ("rope_cache", "rope", (np.zeros((3, 4)), np.arange(3)), {"base": 500.0}),
])
def test_every_rebinding_binds_the_same_arguments_as_python_and_names_come_in_drawn_orders(exercise, name, args,
                                                                                          kwargs):
    """Python's own binder is the oracle: each rebound call binds to the recorded call's arguments (defaults
    filled), one binding mixes positions and names, and the names' order is not always the signature's."""
    import inspect
    signature = inspect.signature(_stub_function(exercise, name))
    want = signature.bind(*args, **kwargs)
    want.apply_defaults()
    params = binding.signature(catalog.get(exercise).stub_path, name)
    orders, mixed = set(), False
    for seed in range(20):
        for new_args, new_kwargs, how in _general._rebound(params, args, kwargs, np.random.default_rng(seed)):
            got = signature.bind(*new_args, **new_kwargs)
            got.apply_defaults()
            assert set(got.arguments) == set(want.arguments), how
            assert all(got.arguments[n] is want.arguments[n] or got.arguments[n] == want.arguments[n]
                       for n in want.arguments), how
            orders.add(tuple(new_kwargs))
            mixed |= bool(new_args) and bool(new_kwargs) and len(new_args) < len(args)
    named = [n for n in signature.parameters]
    assert mixed and any(list(o) != [n for n in named if n in o] for o in orders if len(o) > 1)


@pytest.mark.slow
def test_keyword_arguments_read_by_their_order_fail_the_binding_rule(tmp_path):
    """Red team 26: classify_tiles(*args, **kwargs) reading keywords by their place passed while names always
    came in the signature's order."""
    path = _submission(tmp_path, "tile_classification", extra="""

_by_place = classify_tiles


def classify_tiles(*args, **kwargs):
    return _by_place(*args, *kwargs.values())
""")
    result, checks = _graded(path, "tile_classification", only={"arguments_bound_either_way"})
    failed = checks["arguments_bound_either_way"]
    assert not failed.passed and failed.kind == "wrong" and "by name" in failed.message
