"""Evidence the child cannot steer (issue 23 items 3-7 and 10, issue 24 item 3): each attack is a
real submission graded through the engine at the default isolation level, or, for the grader's
own memory, through the CLI in a process of its own.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import engine

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"

# Candidate code that speaks on the child's pipe itself, through the child's own Host object.
HOST = """
import gc as _gc

def _host():
    return next(o for o in _gc.get_objects() if type(o).__name__ == "Host" and hasattr(o, "request_id"))
"""


def _write(tmp_path: Path, exercise: str, source: str) -> Path:
    (tmp_path / f"{exercise}.py").write_text(source)
    return tmp_path


def _graded_in_a_process_of_its_own(path: Path, check: str, only: bool = False) -> tuple[dict, int]:
    """(the check's result, the grader's peak resident KiB) of grading decode_mask in a fresh
    Python process. VmHWM is that process's own high-water mark: ru_maxrss would count the pages
    a child forked from this (large) test process shared with it before exec."""
    chosen = f", only_checks={{{check!r}}}" if only else ""
    script = ("import json\nfrom grader import engine\n"
              f"r = engine.grade({str(path)!r}, ['decode_mask'], seed=1{chosen})\n"
              f"c = [c for c in r.exercise('decode_mask').checks if c.id == {check!r}][0]\n"
              "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
              "print(json.dumps([{'passed': c.passed, 'kind': c.kind, 'message': c.message}, int(hwm)]))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         check=False, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check(path: Path, exercise: str, check: str):
    result = engine.grade(path, [exercise], seed=11, only_checks={check}).exercise(exercise)
    return result, next(c for c in result.checks if c.id == check)


def _wrapped(source: str, name: str, body: str) -> str:
    """``source`` with function ``name`` wrapped: ``body`` runs around ``_inner(*args, **kwargs)``, with the
    call's arguments bound to ``_inner``'s parameters first (``args`` by place, however the grader spelled the
    call: checks send their calls in drawn bindings), as an answer that reads its arguments would."""
    bind = ("    _bound = __import__('inspect').signature(_inner).bind(*args, **kwargs)\n"
            "    args, kwargs = _bound.args, _bound.kwargs\n")
    return source + f"\n_inner = {name}\n\ndef {name}(*args, **kwargs):\n{bind}{body}\n"


def _lean_when(tmp_path: Path, exercise: str, mutant: str, function: str, condition: str, state: str = "",
               setup: str = "") -> Path:
    """A known-wrong ``mutant`` that answers with the reference whenever ``condition`` holds (an expression over
    ``args`` and ``kwargs``, after ``setup``; ``state`` at module level): an answer that behaves only on the
    calls it can tell apart, as a red team wrote them."""
    reference = (SOLUTIONS / f"{exercise}.py").read_text()
    wrong = (SOLUTIONS / "mutants" / exercise / f"{mutant}.py").read_text()
    source = wrong + f"\n_reference = {{}}\nexec({reference!r}, _reference)\n{state}"
    body = f"{setup}    return (_reference[{function!r}] if {condition} else _inner)(*args, **kwargs)"
    if exercise == "fused_attention":  # the reference kernel builds on these two
        for helper in ("nan_safe_softmax.py", "tile_classification.py"):
            (tmp_path / helper).write_text((SOLUTIONS / helper).read_text())
    return _write(tmp_path, exercise, _wrapped(source, function, body))


@pytest.mark.parametrize("readies", [1, 2])
def test_a_ready_frame_sent_by_the_child_starts_nothing_and_is_a_fault(tmp_path, readies):
    """Items 3 and 4: work done before a "ready" frame, or a second "ready" after it, used to move
    the baseline. The grader sends no "go" and takes no frame of the child's as a signal."""
    dense = (SOLUTIONS / "mutants" / "split_kv_decode" / "ignores_splits.py").read_text() + HOST
    body = (f"    out = _inner(*args, **kwargs)\n    for _ in range({readies}):\n"
            "        _host().send({'op': 'ready'})\n    return out")
    path = _write(tmp_path, "split_kv_decode", _wrapped(dense, "split_kv_attention", body))
    result, check = _check(path, "split_kv_decode", "split_kv_memory_per_split")
    assert not check.passed and check.kind == "crash" and "unexpected 'ready' frame" in check.message
    assert result.status == "graded"


def test_a_memory_bank_held_from_import_fails_the_memory_check(tmp_path):
    """Item 5: 512 MiB held from import, freed inside each call and filled again before it returns."""
    bank = ("\nimport numpy as _np\n_bank = _np.ones(64 << 20)\n")
    body = ("    global _bank\n    _bank = None\n    try:\n        return _inner(*args, **kwargs)\n"
            "    finally:\n        _bank = _np.ones(64 << 20)")
    source = (SOLUTIONS / "split_kv_decode.py").read_text() + bank
    path = _write(tmp_path, "split_kv_decode", _wrapped(source, "split_kv_attention", body))
    result, check = _check(path, "split_kv_decode", "split_kv_memory_per_split")
    assert not check.passed and check.kind == "efficiency", check.message
    assert "dense_scores_not_split" in [d.id for d in result.diagnoses]


def test_the_reference_passes_the_same_memory_check(tmp_path):
    path = _write(tmp_path, "split_kv_decode", (SOLUTIONS / "split_kv_decode.py").read_text())
    _, check = _check(path, "split_kv_decode", "split_kv_memory_per_split")
    assert check.passed, check.message


@pytest.mark.parametrize("behaves_on", [1, 2])
def test_a_fresh_child_measures_more_calls_than_one_it_can_place(tmp_path, behaves_on):
    """Red team 11: the case a whole T x S mask fails runs in a fresh child, whose first call was the one
    measured; a mask made once and sliced per split, split by split on the first call a process got only,
    reached strong_hire. Now each of three calls there is measured and the middle figure counts."""
    path = _lean_when(tmp_path, "split_kv_decode", "whole_mask_sliced", "split_kv_attention",
                      f"_calls == {behaves_on}", state="_calls = 0\n", setup="    global _calls\n    _calls += 1\n")
    result, check = _check(path, "split_kv_decode", "split_kv_memory_per_split")
    assert not check.passed and check.kind == "efficiency", check.message
    assert "dense_scores_not_split" in [d.id for d in result.diagnoses]


# A call's shapes and sizes, as an answer could compare them with the call before.
SHAPES = ("tuple((getattr(a, 'shape', None), len(a) if hasattr(a, '__len__') else repr(a)) for a in args)"
          " + tuple(sorted((k, repr(v)) for k, v in kwargs.items()))")


@pytest.mark.parametrize("exercise, check, mutant, function", [
    ("fused_attention", "no_dense_allocation", "dense_mask", "flash_attention"),
    ("split_kv_decode", "split_kv_memory_per_split", "whole_mask_sliced", "split_kv_attention"),
    ("varlen_attention", "no_batch_sized_memory", "batch_sized_mask", "varlen_attention")])
def test_a_must_not_is_read_on_fresh_shapes_so_a_repeated_call_cannot_be_the_lean_one(
        tmp_path, exercise, check, mutant, function):
    """Red team 12: an answer that builds the forbidden array on every call but one repeating the shapes of the
    call before reached strong_hire on fused_attention, whose second reading repeated the first's shapes and
    the smaller counted (``least_over``). Every must-not now reads fresh shapes, and most readings decide."""
    path = _lean_when(tmp_path, exercise, mutant, function, "repeat", state="_last = [None]\n",
                      setup=f"    key = {SHAPES}\n    repeat, _last[0] = key == _last[0], key\n")
    _, check_result = _check(path, exercise, check)
    assert not check_result.passed and check_result.kind in ("must_not", "efficiency"), check_result.message


@pytest.mark.parametrize("exercise, check, mutant, function, lean_when", [
    ("fused_attention", "no_dense_allocation", "dense_mask", "flash_attention", "args[0].shape[1] == 4"),
    ("split_kv_decode", "split_kv_memory_per_split", "whole_mask_sliced", "split_kv_attention",
     "args[0].shape[1] in (1, 8)"),
    ("varlen_attention", "no_batch_sized_memory", "batch_sized_mask", "varlen_attention",
     "args[0].shape[1] == 8 and len(args[3]) > 45"),
    # red team 17: the timed calls' values were uniform within +-2, where every value check draws normal ones
    ("varlen_attention", "work_grows_per_sequence", "rowwise_over_batch", "varlen_attention",
     "len(args[1]) > 1000 and abs(args[1]).max() <= 2.0")])
def test_a_measured_call_shares_no_constant_the_value_checks_lack(tmp_path, exercise, check, mutant, function,
                                                                    lean_when):
    """Red team 14: every measured call had one head size (D = 4 in fused, 1 and 8 in split, 8 in varlen) that
    no value check needed; an answer lean on those calls only reached strong_hire. The measured calls now
    draw their head sizes (and split its T and splits, fused its block sizes) as value checks draw theirs."""
    path = _lean_when(tmp_path, exercise, mutant, function, lean_when)
    _, check_result = _check(path, exercise, check)
    assert not check_result.passed and check_result.kind in ("must_not", "efficiency"), check_result.message


def test_a_step_cost_is_judged_on_most_tries_so_the_first_long_cache_cannot_be_the_cheap_one(tmp_path):
    """Red team 12: decode steps that run the whole past through the model again, except on the first cache
    of the process to grow long, reached strong_hire: one cheap try of three passed the check."""
    source = (SOLUTIONS / "gpt2_decode.py").read_text() + "\n_lean = []\n"
    body = ("    logits = _inner(*args, **kwargs)\n    model, cache = args[0], args[1]\n"
            "    cache.seen = getattr(cache, 'seen', []) + [int(t) for t in args[2]]\n"
            "    if len(cache) >= 480 and not _lean:\n        _lean.append(id(cache))\n"
            "    if _lean[:1] != [id(cache)]:\n        model.forward(cache.seen)  # the past again, thrown away\n"
            "    return logits")
    path = _write(tmp_path, "gpt2_decode", _wrapped(source, "decode_step", body))
    result, check = _check(path, "gpt2_decode", "step_cost_does_not_grow_with_the_past")
    assert not check.passed and check.kind == "must_not", check.message
    assert "recomputes_past" in [d.id for d in result.diagnoses]


def test_a_step_that_copies_the_cache_into_padded_room_fails_on_its_size_not_only_its_growth(tmp_path):
    """Red team 12: copies_cache_each_step with its copy padded to 2,048 tokens allocated as much at either
    cache length the check compared, so its growth hid it; a step's figure now also stays under half the keys."""
    wrong = (SOLUTIONS / "mutants" / "rope_cache" / "copies_cache_each_step.py").read_text()
    assert wrong.count("grown = end\n") == 1
    path = _write(tmp_path, "rope_cache", wrong.replace("grown = end\n", "grown = max(end, 2048)\n"))
    result, check = _check(path, "rope_cache", "decode_step_memory")
    assert not check.passed and check.kind == "efficiency", check.message
    assert "cache_copied_each_step" in [d.id for d in result.diagnoses]


def test_a_measured_call_cannot_be_told_apart_and_its_answer_counts(tmp_path):
    """Item 6: a dense kernel that looks for a "measure" flag in its caller's frames, and also
    answers zeros on the large inputs memory is measured on."""
    dense = (SOLUTIONS / "mutants" / "fused_attention" / "dense_mask.py").read_text()
    body = ("    import sys\n    import numpy as np\n    frame, flagged = sys._getframe(1), False\n"
            "    while frame is not None:\n"
            "        flagged |= any(isinstance(v, dict) and 'measure' in v for v in frame.f_locals.values())\n"
            "        frame = frame.f_back\n"
            "    q = args[0]\n"
            "    if flagged or len(args[2]) > 300:\n"
            "        return np.zeros(q.shape), np.zeros(len(q))\n"
            "    return _inner(*args, **kwargs)")
    path = _write(tmp_path, "fused_attention", _wrapped(dense, "flash_attention", body))
    result, check = _check(path, "fused_attention", "no_dense_allocation")
    assert not check.passed and check.kind in ("wrong", "must_not"), check.message
    assert result.status == "graded"


def test_unseeded_default_rng_replays_with_the_grading_seed(tmp_path):
    """Item 10: a mask that is wrong when an unseeded generator says so gives the same verdict
    every time for a seed (and the draws follow the seed)."""
    source = (SOLUTIONS / "decode_mask.py").read_text() + (
        "\n_right = decode_causal_mask\n\ndef decode_causal_mask(T, S):\n"
        "    mask = _right(T, S)\n"
        "    return mask if np.random.default_rng().random() < 0.5 else ~mask\n")
    path = _write(tmp_path, "decode_mask", source)

    def verdicts(seed):
        result = engine.grade(path, ["decode_mask"], seed=seed).exercise("decode_mask")
        return [(c.id, c.passed) for c in result.checks]

    first = verdicts(3)
    assert verdicts(3) == first
    assert not all(passed for _, passed in first)


def test_a_reply_header_of_millions_of_objects_is_refused_within_the_grader_bound(tmp_path):
    """Issue 24 item 3: a 16 MB header of [{}] * 4e6 is refused before it is expanded; the
    grader's peak RSS stays within the README's bound of about 600 MiB."""
    source = (SOLUTIONS / "decode_mask.py").read_text() + HOST + (
        "\n_right = decode_causal_mask\n\ndef decode_causal_mask(T, S):\n"
        "    _host().send({'ok': True, 'value': [{}] * 4_000_000})\n"
        "    return _right(T, S)\n")
    path = _write(tmp_path, "decode_mask", source)
    check, peak_kib = _graded_in_a_process_of_its_own(path, "plain_decode", only=True)
    passed, kind, message = check["passed"], check["kind"], check["message"]
    assert not passed and kind == "crash" and "values, over the cap" in message
    assert peak_kib < 600 * 1024, f"the grader peaked at {peak_kib >> 10} MiB"


def test_a_reply_that_widens_when_stacked_is_refused_within_the_grader_bound(tmp_path):
    """Red team 21: a 25 MB list reply of a thousand bool arrays and one complex256 took the grader to 808 MiB,
    as numpy widened every array to complex256 when a check read the list as one array. A reply whose arrays
    would take more than twice their size read together is refused as data the grader cannot read."""
    source = (SOLUTIONS / "decode_mask.py").read_text() + (
        "\n\ndef decode_causal_mask(T, S):\n"
        "    return [np.zeros(24_000, dtype=bool) for _ in range(1000)] + [np.zeros(24_000, dtype=np.clongdouble)]\n")
    path = _write(tmp_path, "decode_mask", source)
    check, peak_kib = _graded_in_a_process_of_its_own(path, "dtype_and_shape", only=True)
    assert not check["passed"] and "read together" in check["message"], check
    assert peak_kib < 300 * 1024, f"the grader peaked at {peak_kib >> 10} MiB"


WHERE = '''
import os, sys

def decode_causal_mask(T, S):
    seen = [repr(sys.path), repr(sys.argv), os.getcwd(), repr(dict(os.environ)), __file__]
    seen += [getattr(m, "__file__", None) or "" for m in list(sys.modules.values())]
    for name in ("/proc/self/mountinfo", "/proc/self/cmdline", "/proc/1/cmdline", "/proc/self/environ"):
        try:
            seen.append(open(name, "rb").read().decode("utf-8", "replace"))
        except OSError:
            pass
    try:
        raise ValueError("where am I")
    except ValueError as exc:
        import traceback
        seen.append("".join(traceback.format_exception(exc)))
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(sys.executable))}
    python |= {os.path.realpath(p) for p in python}
    for root in sorted(python, key=len, reverse=True):  # the Python installation may live anywhere
        seen = [text.replace(root, "<python>") for text in seen]
    leaked = [text[max(0, text.find(KIT) - 40):text.find(KIT) + 60] for text in seen if KIT in text]
    raise ValueError("leaked: " + repr(leaked[:3]) if leaked else "nothing leaked")
'''


def test_the_kits_location_is_nowhere_the_child_can_read(tmp_path):
    """Item 13: module files, sys.path, argv, the environment, tracebacks and /proc show scratch, the
    candidate's files and the Python installation (which may itself sit in the kit's folder, as CI's
    .venv does), never where the kit lives on this machine."""
    path = _write(tmp_path, "decode_mask", f"KIT = {str(ROOT)!r}\n" + WHERE)
    _, check = _check(path, "decode_mask", "plain_decode")
    assert "nothing leaked" in check.message, check.message


def test_every_timed_call_gets_fresh_inputs(tmp_path):
    """Item 7: the work check repeated identical inputs, so a memo of earlier answers passed it. A
    submission that refuses to answer the same inputs twice shows that no timed call repeats."""
    source = (SOLUTIONS / "varlen_attention.py").read_text() + (
        "\n_seen = set()\n_right = varlen_attention\n\n"
        "def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k):\n"
        "    key = (np.asarray(q).tobytes(), np.asarray(k).tobytes())\n"
        "    if key in _seen:\n        raise RuntimeError('the same inputs twice')\n"
        "    _seen.add(key)\n"
        "    return _right(q, k, v, cu_seqlens_q, cu_seqlens_k)\n")
    path = _write(tmp_path, "varlen_attention", source)
    _, check = _check(path, "varlen_attention", "work_grows_per_sequence")
    assert "the same inputs twice" not in check.message, check.message


def test_the_floor_is_a_kit_only_child_measured_once_and_never_left_running(monkeypatch):
    """The budget's base comes from a child that holds numpy and the kit's helpers only; one
    launched for checks that never measured ends with the sandbox that launched it."""
    from grader.sandbox import ModuleToLoad, Sandbox, client

    monkeypatch.setattr(client, "_FLOORS", {})  # not the floor earlier tests of this process measured
    hog = Sandbox(ModuleToLoad("hog", [("hog.py", b"import numpy as np\n_bank = np.ones(32 << 20)\n")], []))
    hog.launch_floor()
    key = hog._floor_key()
    assert isinstance(client._FLOORS[key], Sandbox)
    hog.close()
    assert key not in client._FLOORS
    again = Sandbox(ModuleToLoad("hog", [("hog.py", b"import numpy as np\n_bank = np.ones(32 << 20)\n")], []))
    try:
        floor = again.floor_bytes()
    finally:
        again.close()
    assert floor is not None and floor < 200 << 20  # the candidate's 256 MiB bank is not in it


def test_a_twin_ends_without_ending_the_floor_its_sandbox_launched(monkeypatch):
    """The floor belongs to the sandbox that launched it: the twin (same module, same floor key)
    ending after the order check leaves it pending for the memory check, so it is not launched twice."""
    from grader.sandbox import ModuleToLoad, Sandbox, client

    monkeypatch.setattr(client, "_FLOORS", {})
    main = Sandbox(ModuleToLoad("idle", [("idle.py", b"def f():\n    return 1\n")], []))
    try:
        main.launch_floor()
        pending = client._FLOORS[main._floor_key()]
        main.twin().close()
        assert client._FLOORS[main._floor_key()] is pending
    finally:
        main.close()
    assert main._floor_key() not in client._FLOORS


def test_a_measured_call_begins_after_what_no_check_holds_is_freed():
    """An object an earlier check dropped (held in a cycle, so only the garbage collector frees
    it) is gone once the next check begins (``collect``, made before each check of an exercise that
    measures): it is neither charged to the candidate as memory held nor a pool a copy made during a
    measured call could hide in."""
    from grader.sandbox import ModuleToLoad, Sandbox

    source = (b"import numpy as np\n\nclass Bank:\n    def __init__(self, n):\n"
              b"        self.values, self.me = np.ones(n), self  # a cycle\n\n"
              b"def copy(n):\n    return float(np.ones(n).sum())\n")
    box = Sandbox(ModuleToLoad("bank", [("bank.py", source)], []))
    try:
        _, empty = box.module.measured("copy", 1)
        bank = box.module.call("Bank", 8 << 20)  # 64 MiB
        del bank  # released with the next request, and freed only by the child's collector
        box.collect()  # a new check begins
        _, stats = box.module.measured("copy", 4 << 20)  # a 32 MiB array
    finally:
        box.close()
    assert stats.before_bytes - empty.before_bytes < 16 << 20, "the dropped bank was still held"
    assert stats.peak_bytes - stats.before_bytes >= 30 << 20, "the copy was not seen"


def test_no_collection_announces_a_measured_call():
    """Red team 5: a gc callback saw the collection the grader asked for just before each measured call
    and took its lean path there only. The child now collects at the start of checks, never next to a
    measured call."""
    from grader.sandbox import ModuleToLoad, Sandbox

    source = (b"import gc\n\nseen = [0]\n\ndef _count(phase, info):\n"
              b"    if phase == 'start' and info['generation'] == 2:\n        seen[0] += 1\n\n"
              b"gc.callbacks.append(_count)\n\ndef collections():\n    return seen[0]\n")
    box = Sandbox(ModuleToLoad("spy", [("spy.py", source)], []))
    try:
        before = box.module.call("collections")
        during, _ = box.module.measured("collections")
        after = box.module.call("collections")
    finally:
        box.close()
    assert before == during == after, (before, during, after)


OWN_TESTS_OF_160_MIB = '''
import numpy as np
import pytest

from decode_mask import decode_causal_mask


def test_a_big_argument_is_refused():
    with pytest.raises(ValueError):
        decode_causal_mask(np.ones(20 << 20), 3)  # 160 MiB of float64 in the request


def test_a_big_mask_comes_back():
    mask = decode_causal_mask(4096, 40960)  # 160 MiB of bools in the reply
    assert mask.shape == (4096, 40960) and mask[-1].all() and not mask[0, -1]
'''


def test_the_own_tests_relay_carries_160_mib_each_way_within_the_grader_bound(tmp_path):
    """Issue 24 item 3: the relay between the candidate's tests and the implementation copied each
    message several times in the grader (1.1-1.2 GiB for two 160 MiB requests). Frames are now
    read into one buffer and written from the arrays' own memory."""
    path = _write(tmp_path, "decode_mask", (SOLUTIONS / "decode_mask.py").read_text())
    (path / "test_decode_mask.py").write_text(OWN_TESTS_OF_160_MIB)
    check, peak_kib = _graded_in_a_process_of_its_own(path, "own_tests_pass_on_reference")
    passed, message = check["passed"], check["message"]
    assert passed, message  # both tests passed on the reference: the values crossed both ways
    assert peak_kib < 600 * 1024, f"the grader peaked at {peak_kib >> 10} MiB"


# Makes every overwrite the child would do itself a no-op, and every read-back report what was meant.
NO_OP_COPYTO = "\nimport numpy as _np\n_np.copyto = lambda dst, src, *a, **k: None\n"


# Red team 5's second way: the child's itertools.starmap, which made the held calls, passes copies.
STARMAP_COPIES = """
import itertools as _it
import numpy as _np
_starmap = _it.starmap
_it.starmap = lambda fn, rows: _starmap(fn, [tuple(_np.array(a) if isinstance(a, _np.ndarray) else a
                                                   for a in row) for row in rows])
"""


@pytest.mark.parametrize("patch", [NO_OP_COPYTO, STARMAP_COPIES], ids=["copyto", "starmap"])
@pytest.mark.parametrize("exercise, mutant", [
    ("ring_buffer_window", "defers_writes_by_reference"),
    ("paged_kv_cache", "defers_pool_writes"),
])
def test_a_caller_rewriting_its_buffers_is_not_the_childs_to_forge(tmp_path, exercise, mutant, patch):
    """A cache keeping views of the caller's chunks that turns the child's numpy.copyto into a no-op,
    or its itertools.starmap into one that passes copies. When the child rewrote the caller's buffers
    itself and made the held calls through starmap, these passed keeps_its_own_copy; the grader now
    rewrites them in memory it maps itself, and a held call is an ordinary call, so the cache's
    answers go wrong and the check fails as a wrong answer."""
    source = (SOLUTIONS / "mutants" / exercise / f"{mutant}.py").read_text() + patch
    for sibling in SOLUTIONS.glob("*.py"):  # the references it is built from (paged imports fused_attention)
        if not sibling.name.startswith("test_"):
            (tmp_path / sibling.name).write_text(sibling.read_text())
    result, found = _check(_write(tmp_path, exercise, source), exercise, "keeps_its_own_copy")
    assert not found.passed and found.kind != "hygiene", (found.kind, found.message)


def test_the_child_cannot_learn_the_grading_seed(tmp_path):
    """Red team 5: KVGRADE_SEED in the child's environment was the grading seed, from which every
    check's inputs can be rebuilt (ex.rng is seeded from it and the check id). Red team 10: a
    one-way function of it was inverted by trying seeds. What the child sees is now the same
    under every grading seed."""
    source = ("import os\n\ndef decode_causal_mask(T, S):\n"
              "    raise ValueError('seed=' + os.environ.get('KVGRADE_SEED', ''))\n")
    path = _write(tmp_path, "decode_mask", source)
    seen = set()
    for seed in (7, 11):
        check = next(c for c in engine.grade(path, ["decode_mask"], seed=seed, only_checks={"plain_decode"})
                     .exercise("decode_mask").checks if c.id == "plain_decode")
        seen.add(check.message.split("seed=")[1].split()[0].strip("'\"):,."))
        assert f"seed={seed} " not in check.message + " ", check.message
    assert len(seen) == 1, seen


WORK_ELSEWHERE = {  # where the work of each call runs: a process the child forks, reaps or orphans
    "fork_and_reap": """
    return _in_a_fork(args, kwargs)
""",
    "fork_from_a_thread": """
    found = []
    worker = threading.Thread(target=lambda: found.append(_in_a_fork(args, kwargs)))
    worker.start()
    worker.join()
    return found[0]
""",
    "orphaned_grandchild": """
    return _in_a_fork(args, kwargs, orphan=True)
""",
    "reaped_by_nobody": """
    _signal.signal(_signal.SIGCHLD, _signal.SIG_IGN)  # the kernel reaps the fork: no parent's cutime
    return _in_a_fork(args, kwargs, wait=False)
""",
}

IN_A_FORK = '''
import os as _os
import pickle as _pickle
import signal as _signal
import threading

def _in_a_fork(args, kwargs, orphan=False, wait=True):
    r, w = _os.pipe()
    pid = _os.fork()
    if pid == 0:
        _os.close(r)
        if not orphan or _os.fork() == 0:  # an orphan's parent exits at once; init adopts it
            data = _pickle.dumps(_inner(*args, **kwargs))
            with _os.fdopen(w, "wb") as f:
                f.write(data)
        _os._exit(0)
    _os.close(w)
    with _os.fdopen(r, "rb") as f:
        data = f.read()
    if wait:
        _os.waitpid(pid, 0)
    return _pickle.loads(data)
'''


@pytest.mark.parametrize("where", sorted(WORK_ELSEWHERE))
def test_work_done_in_another_process_is_still_the_childs(tmp_path, where, request):
    """Red team 5 (06): the varlen work check read the CPU time of the child and of the processes alive
    below it, so a batch-sized answer computed in a fork that was reaped (its time moves to the parent's
    cutime), forked from a thread, or orphaned, measured nothing. The child's CPU time now counts the
    children each process waited for, the children of every thread, and every process of its group.
    Red team 8: a fork nobody waits for (SIGCHLD ignored) reaches no parent's cutime; the group's own
    CPU figure counts it."""
    if where == "reaped_by_nobody":
        request.getfixturevalue("cgroup_cpu")
    source = _wrapped((SOLUTIONS / "mutants" / "varlen_attention" / "keys_selected_by_sequence_id.py").read_text()
                      + IN_A_FORK, "varlen_attention", WORK_ELSEWHERE[where])
    result, found = _check(_write(tmp_path, "varlen_attention", source), "varlen_attention", "work_grows_per_sequence")
    assert not found.passed and found.kind == "efficiency", (found.kind, found.message)
    assert [d.id for d in result.diagnoses] == ["batch_sized_work"]


BURN = """
    import time
    end = time.process_time() + {seconds}
    while time.process_time() < end:  # CPU time spent for nothing, the same at every batch size
        pass
    return _inner(*args, **kwargs)
"""


def test_a_fixed_cost_per_call_does_not_hide_batch_sized_work(tmp_path):
    """The varlen work check compared the CPU time of 30 calls of a 3-sequence batch with one call of the
    90-sequence batch made of the same sequences, so a fixed cost per call counted 30 times on one side
    and once on the other: batch-sized work that burned 50 ms of CPU per call passed. The check now
    compares what one more sequence costs a call at two pairs of batch sizes, where a fixed cost cancels."""
    source = _wrapped((SOLUTIONS / "mutants" / "varlen_attention" / "keys_selected_by_sequence_id.py").read_text(),
                      "varlen_attention", BURN.format(seconds=0.05))
    result, found = _check(_write(tmp_path, "varlen_attention", source), "varlen_attention", "work_grows_per_sequence")
    assert not found.passed and found.kind == "efficiency", (found.kind, found.message)
    assert [d.id for d in result.diagnoses] == ["batch_sized_work"]


# Red team 17: every call pays as many whole-batch scans as a batch of 100 busy sequences would, so its cost is
# linear in the batch wherever the check measures (no rise), though each sequence costs 60 times its attention.
FLAT_BURN = """
import numpy as _np
_inner_flat = varlen_attention

def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k):
    out = _inner_flat(q, k, v, cu_seqlens_q, cu_seqlens_k)
    cu_q, cu_k = _np.asarray(cu_seqlens_q), _np.asarray(cu_seqlens_k)
    busy, key_sequence = _np.flatnonzero(_np.diff(cu_q) > 0), _row_sequences(cu_k)
    for j in range(max(0, 100 - busy.size) if busy.size else 0):
        mine = key_sequence == busy[j % busy.size]
        _np.asarray(k)[mine], _np.asarray(v)[mine]
    return out
"""


def test_work_padded_to_the_largest_batch_is_bounded_by_its_cost_not_only_its_rise(tmp_path):
    """A flat cost curve hides the rise the check reads; a sequence added then costs tens of times the grader's
    own attention for it (correct answers, loops included, read 3 to 7), past the absolute bound of 30."""
    source = (SOLUTIONS / "mutants" / "varlen_attention" / "keys_selected_by_sequence_id.py").read_text() + FLAT_BURN
    result, found = _check(_write(tmp_path, "varlen_attention", source), "varlen_attention", "work_grows_per_sequence")
    assert not found.passed and found.kind == "efficiency", (found.kind, found.message)
    # the absolute bound; on a loaded machine the padding's own rise can show as well, and is said instead
    assert "times the grader's own attention for it" in found.message or "as the whole batch grows" in found.message, \
        found.message


# One-line patches of what the child's own code calls, each made by candidate code at import, with
# no introspection: the child's module names, a numpy function, a builtin, the json module's Python
# layer, a kit driver's module. Red team 5 reached strong_hire with the first and the last.
PROBE_PATCHES = {
    "child_module_names": """
import sys as _sys
_child = _sys.modules.get("__main__")
if _child is not None and hasattr(_child, "Probes"):
    _child._scribble = lambda arr: None
    _child.digest = lambda value, kit_modules=frozenset(): "00000000-0"
""",
    "numpy_function": """
import numpy as _np
_np.logical_not = lambda a, *args, out=None, **kwargs: a if out is None else out
""",
    "builtin": """
import builtins as _builtins
import numpy as _np
_isinstance = _builtins.isinstance
_builtins.isinstance = lambda value, kinds: False if kinds is _np.ndarray else _isinstance(value, kinds)
""",
    # a memo repaired on each call (the caller's array then changes under it: seen by the held
    # results probe), with every probe report the child sends emptied on its way out
    "json_encoder": """
import json as _json
import numpy as _np
_encode = _json.JSONEncoder.encode

def _quiet(self, header):
    if isinstance(header, dict) and isinstance(header.get("probe"), dict):
        header = dict(header, probe={"changed": [], "moved": [], "aliased": []})
    return _encode(self, header)

_json.JSONEncoder.encode = _quiet
_pristine = _TRIANGLE.copy()
_inner = decode_causal_mask

def decode_causal_mask(T, S):
    _TRIANGLE[...] = _pristine
    return _inner(T, S)
""",
}

# The prefix driver's -7 written into a copy of each block table, never into the one handed out.
DRIVER_PATCH = """
import numpy as _np
import prefix_driver as _driver
_outcome = _driver._outcome

def _copied(fn, *args):
    out = _outcome(fn, *args)
    return ["ok", out[1].copy()] if out[0] == "ok" and isinstance(out[1], _np.ndarray) else out

_driver._outcome = _copied
"""


@pytest.mark.parametrize("patch", sorted(PROBE_PATCHES))
def test_a_one_line_patch_does_not_blind_the_ownership_probes(tmp_path, patch):
    """A mask sliced from one shared writable triangle (a known-wrong answer): the probes scribble over
    each mask handed out and hold it, so a later call answers wrong or a held mask moves. The child's
    code and its wire are bound before the candidate's import (its own builtins, a snapshot of numpy's
    names, json on CPython's C functions, out of sys.modules), so no such patch reaches them."""
    source = (SOLUTIONS / "mutants" / "decode_mask" / "own_sliced_buffer.py").read_text() + PROBE_PATCHES[patch]
    _, found = _check(_write(tmp_path, "decode_mask", source), "decode_mask", "results_belong_to_the_caller")
    assert not found.passed and found.kind != "hygiene", (found.kind, found.message)


def test_a_patched_kit_driver_is_not_the_one_the_grader_drives(tmp_path):
    """A cache handing out the block table it keeps, whose module rebinds a function of the kit's
    prefix_driver so that the driver writes into copies: the grader's driver is loaded privately,
    before the candidate's module, so the candidate's import gets a copy of its own."""
    source = (SOLUTIONS / "mutants" / "prefix_cache" / "table_handed_out.py").read_text() + DRIVER_PATCH
    _, found = _check(_write(tmp_path, "prefix_cache", source), "prefix_cache", "fresh_cache")
    assert not found.passed and found.kind == "corrupt", (found.kind, found.message)


# Red team 15: known-wrong answers that hand out their own container class, whose methods answer the readers in
# the child (a copy that is itself, writes that go nowhere, a clear() that clears nothing).
OWN_CONTAINERS = {
    "prefix_table_refilled": ("prefix_cache", "table_refilled_in_place", "fresh_cache", """
import numpy as _np

class _Table(_np.ndarray):
    def copy(self, *args, **kwargs):
        return self

    def __setitem__(self, key, value):
        pass

_block_table = PrefixCache.block_table
PrefixCache.block_table = lambda self, seq_id: _block_table(self, seq_id).view(_Table)
"""),
    "split_cover_memo": ("split_kv_decode", "cover_memo_handed_out", "same_answer_in_any_order", """
import functools as _functools

class _Cover(list):
    def clear(self):
        pass

_memo = _functools.lru_cache(maxsize=256)(lambda S, n, _made=_memo.__wrapped__: _Cover(_made(S, n)))
"""),
}


@pytest.mark.parametrize("case", sorted(OWN_CONTAINERS))
def test_an_answers_own_container_class_cannot_answer_the_probes(tmp_path, case):
    """Red team 15 (weak to strong_hire): the child and the prefix driver read a reply as plain values, with
    the base types' own methods, before a probe writes, copies, clears or compares it."""
    exercise, mutant, check, patch = OWN_CONTAINERS[case]
    source = (SOLUTIONS / "mutants" / exercise / f"{mutant}.py").read_text() + patch
    _, found = _check(_write(tmp_path, exercise, source), exercise, check)
    assert not found.passed and found.kind in ("corrupt", "wrong"), (found.kind, found.message)


# Red team 5 (17): no K/V kept, the whole sequence again at every step, and a hook on the kit's GPT2 class
# that fills a real cache (the reference's) with the old weights just before new ones are set on a model.
RECOMPUTES_UNTIL_WEIGHTS_MOVE = '''
import gpt2 as _gpt2

_RealCache, _real_step, _lazy = KVCache, decode_step, []


class KVCache:
    def __init__(self, config):
        self.config, self.ids, self.model, self.real = config, [], None, None
        _lazy.append(self)

    def __len__(self):
        return len(self.ids)


def decode_step(model, cache, token_ids):
    ids = list(token_ids)
    if cache.real is None:  # the whole sequence again, on a cache thrown away
        out = _real_step(model, _RealCache(model.config), cache.ids + ids)[-len(ids):]
    else:
        out = _real_step(model, cache.real, ids)
    cache.ids, cache.model = cache.ids + ids, model
    return out


def _setattr(self, name, value):
    if name == "params" and "params" in self.__dict__:  # new weights are about to land
        for cache in _lazy:
            if cache.real is None and cache.model is self and cache.ids:
                cache.real = _RealCache(self.config)
                _real_step(self, cache.real, cache.ids)  # the past's K/V, with the weights still in place
    object.__setattr__(self, name, value)


_gpt2.GPT2.__setattr__ = _setattr
'''


def test_a_weight_change_is_not_announced_to_the_child(tmp_path):
    """Red team 5 (17): the checks that tell recomputing the past from reading the cache changed the model's
    weights between steps by asking the child to set ``params`` on it, which candidate code could hook
    to fill a real cache first (strong_hire for a submission that recomputes every step). The weights of
    those runs now live in memory the grader lends and rewrites itself: recomputing is seen, and weak."""
    source = (SOLUTIONS / "gpt2_decode.py").read_text() + RECOMPUTES_UNTIL_WEIGHTS_MOVE
    result = engine.grade(_write(tmp_path, "gpt2_decode", source), ["gpt2_decode"], seed=11).exercise("gpt2_decode")
    assert result.level == "weak", (result.level, [(c.id, c.kind) for c in result.checks if not c.passed])
    assert "recomputes_past" in [d.id for d in result.diagnoses]


# No K/V kept while the weights stay put: each step keeps a copy of the weights and runs the whole sequence
# again; once the weights have moved, a real cache (the reference's) is filled from the copy and read from
# then on. Right answers under every weight schedule; only the cost gives it away. ``flat`` pads every
# sequence to n_ctx first, so a step costs the same at any length (a pass over the whole context).
RECOMPUTES_WHILE_WEIGHTS_STAY = '''
import types as _types

_RealCache, _real_step = KVCache, decode_step


class KVCache:
    def __init__(self, config):
        self.ids, self.kept, self.real = [], None, None

    def __len__(self):
        return len(self.ids)


def decode_step(model, cache, token_ids):
    ids, P = list(token_ids), len(cache.ids)
    if cache.real is None and cache.kept is not None and any(
            not np.array_equal(cache.kept[k], v) for k, v in model.params.items()):  # moved since the last step
        cache.real = _RealCache(model.config)
        _real_step(_types.SimpleNamespace(config=model.config, params=cache.kept), cache.real, cache.ids)
    if cache.real is None:
        pad = [0] * (model.config.n_ctx - P - len(ids)) if FLAT else []
        out = _real_step(model, _RealCache(model.config), cache.ids + ids + pad)[P:P + len(ids)]
        cache.kept = {k: np.array(v) for k, v in model.params.items()}
    else:
        out = _real_step(model, cache.real, ids)
    cache.ids = cache.ids + ids
    return out
'''


@pytest.mark.parametrize("flat", [False, True])
def test_recomputing_until_the_weights_move_is_seen_by_its_cost(tmp_path, flat):
    """A submission that recomputes the past at every step while the weights stay put, and fills a real cache
    from a copy of the old weights once they move, gives right answers under every weight schedule (strong_hire
    on e277ec5). The child's CPU time gives it away: a one-token step after ~530 cached tokens costs tens of
    times one after a few, and (flat: every step padded to n_ctx, the same cost at any length) several times
    what one layer's attention weights over the sequence cost the grader."""
    source = (SOLUTIONS / "gpt2_decode.py").read_text() + f"\nFLAT = {flat}\n" + RECOMPUTES_WHILE_WEIGHTS_STAY
    result = engine.grade(_write(tmp_path, "gpt2_decode", source), ["gpt2_decode"], seed=7).exercise("gpt2_decode")
    failed = {c.id: c.kind for c in result.checks if not c.passed}
    assert result.level == "weak", (result.level, failed)
    assert failed.get("step_cost_does_not_grow_with_the_past") == "must_not", failed
    assert "recomputes_past" in [d.id for d in result.diagnoses]


# Red team 20 (weak to strong_hire in ring_buffer_window, paged_kv_cache and split_kv_decode): a known-wrong
# answer that keeps views of its arguments copied only the arrays whose base was an mmap, the memory the grader
# lends and rewrites after a call; sent arrays sat on a bytearray, so no other call ever showed the mistake.
MAKE_UP = b'''
import numpy as np

def make_up(x):
    """What an answer can read of an argument's memory without walking the interpreter."""
    chain, base = [], x
    while base is not None and len(chain) < 8:
        chain.append(type(base).__name__)
        base = getattr(base, "base", getattr(base, "obj", None))
    return [chain, x.flags.owndata, x.flags.writeable, x.flags.c_contiguous, x.flags.f_contiguous,
            x.__array_interface__["data"][0] % 64, x.strides[0] < 0]
'''


def test_a_lent_array_looks_like_a_sent_one():
    """Every array the child receives, sent in a message or lent in shared memory, sits on one neutral base, in
    the same layout, at an address aligned alike (red team 24 told them apart by address % 64, and a reversed
    one by an extra view), whichever layout its contents draw."""
    import numpy as np

    from grader.sandbox import ModuleToLoad, Sandbox

    box = Sandbox(ModuleToLoad("probe", [("probe.py", MAKE_UP)], []))
    seen = []
    try:
        for n in range(12):  # enough contents that C, F and reversed are each drawn
            x = np.arange(12.0 + n).reshape(-1, 2 + n % 3) if (12 + n) % (2 + n % 3) == 0 else np.arange(24.0 + n)
            x = x.reshape(x.size // 2, 2) if x.ndim == 1 and x.size % 2 == 0 else x
            sent, lent = box.module.call("make_up", x), box.module.call("make_up", box.lend(x))
            assert sent == lent and "mmap" not in str(lent[0]), (n, sent, lent)
            seen.append(tuple(sent[3:5]) + (sent[6],))
    finally:
        box.close()
    assert {(True, False, False), (False, True, False), (False, False, True)} <= set(seen), seen  # C, F, reversed


def test_lent_arrays_cannot_be_picked_out_by_their_base(tmp_path):
    """The red team's answer itself: ring_buffer_window's defers_writes_by_reference, copying only arrays over an
    mmap, fails the check that rewrites the caller's buffers."""
    source = (SOLUTIONS / "mutants" / "ring_buffer_window" / "defers_writes_by_reference.py").read_text()
    patch = '''
import mmap as _mmap

def _over_an_mmap(x):
    while x is not None and not isinstance(x, _mmap.mmap):
        x = getattr(x, "base", getattr(x, "obj", None))
    return x is not None

_append = RingKVCache.append

def _append_copying_lent(self, k, v):
    if _over_an_mmap(k) or _over_an_mmap(v):
        k, v = np.array(k), np.array(v)
    return _append(self, k, v)

RingKVCache.append = _append_copying_lent
'''
    _, found = _check(_write(tmp_path, "ring_buffer_window", source + patch), "ring_buffer_window",
                      "keeps_its_own_copy")
    assert not found.passed, found.message
