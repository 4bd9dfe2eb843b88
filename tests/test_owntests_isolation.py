"""The candidate's own tests never run beside candidate code (issue 23, items 1 and 2).

The own tests hold a proxy to the reference. A second red team relayed its answers to a top-left
``decode_mask`` through open-file-description locks on the Python binary: locks are kernel-wide
and cross every namespace bubblewrap makes. Here that relay is shown to work between two
sandboxed children alive at once, and to get nothing out of a grading, where own tests run only
after every candidate child has ended, one run at a time.
"""
import itertools
import time

import numpy as np
import pytest

from grader import catalog, engine, own_tests
from grader.sandbox import Limits, ModuleToLoad, Sandbox
from grader.sandbox.launch import Scratch, exit_status, kill, spawn
from tests.test_isolation import needs_bwrap

DECODE_MASK = catalog.get("decode_mask")

# Both ends of the relay, a helper file beside the candidate's module (so both the module's child
# and the own tests' child can import it). A request (T, S) is a read lock at REQUEST + (T << 20 | S);
# its answer, the keys row 0 may see, a read lock at ANSWER + (key << 20 | seen). Locks taken through
# an open file description (F_OFD_SETLK) on the shared, read-only Python binary are seen by every
# process on the machine that opens the same file.
LOCK_RELAY = '''
import fcntl, os, struct, sys, time

F_OFD_GETLK, F_OFD_SETLK = 36, 37
RDLCK, WRLCK, UNLCK = 0, 1, 2
REQUEST, ANSWER, SPAN = 1 << 60, 1 << 61, 1 << 40
_fd = os.open(os.path.realpath(sys.executable), os.O_RDONLY)


def _lock(kind, start, length=1, command=F_OFD_SETLK):
    reply = fcntl.fcntl(_fd, command, struct.pack("hhqqi4x", kind, 0, start, length, 0))
    return struct.unpack("hhqqi4x", reply)


def _held_by_others(start, length):
    """The start of a lock another process holds in [start, start + length), or None."""
    kind, _, found, _, _ = _lock(WRLCK, start, length, F_OFD_GETLK)
    return None if kind == UNLCK else found


def ask(T, S, wait):
    """Publish (T, S); the keys row 0 may see, as the relay's other end answers, or None."""
    key = T << 20 | S
    _lock(RDLCK, REQUEST + key)
    deadline = time.monotonic() + wait
    try:
        while time.monotonic() < deadline:
            found = _held_by_others(ANSWER + (key << 20), 1 << 20)
            if found is not None:
                return found - ANSWER - (key << 20)
            time.sleep(0.005)
        return None
    finally:
        _lock(UNLCK, REQUEST + key)


def serve(mask_of, seconds):
    """Answer every request seen within ``seconds`` with ``mask_of(T, S)``; how many were answered."""
    answered = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = _held_by_others(REQUEST, SPAN)
        if found is not None and found - REQUEST not in answered:
            key = found - REQUEST
            seen = int(mask_of(key >> 20, key & ((1 << 20) - 1))[0].sum())
            _lock(RDLCK, ANSWER + (key << 20 | seen))
            answered.add(key)
        time.sleep(0.005)
    return len(answered)
'''

# A top-left mask that asks the relay first: with an answer, every row sees what it should.
RELAYING_MODULE = '''
import time
import numpy as np
import lockrelay

_patience = [3.0]  # seconds of waiting in all, so a dead relay costs the checks little


def decode_causal_mask(T, S):
    T, S = int(T), int(S)
    if not 1 <= T <= S:
        raise ValueError("need 1 <= T <= S")
    began = time.monotonic()
    seen = lockrelay.ask(T, S, min(0.3, _patience[0])) if _patience[0] > 0 else None
    _patience[0] -= time.monotonic() - began
    return np.tril(np.ones((T, S), dtype=bool), k=0 if seen is None else seen - 1)
'''

RELAY_TEST = '''
import lockrelay
from decode_mask import decode_causal_mask


def test_the_relay_reached_the_candidate():
    assert lockrelay.serve(decode_causal_mask, 2.0) > 0
'''


def test_the_lock_relay_crosses_two_sandboxes_alive_at_once():
    """The channel is real: between two children at the default level, the answer gets through."""
    needs_bwrap()
    scratches = [Scratch(prefix="kvgrade-relay-test-") for _ in range(2)]
    children = []
    try:
        for scratch in scratches:
            scratch.add_files("work", [("lockrelay.py", LOCK_RELAY.encode())])
        asker = ("import os, sys\nsys.path.insert(0, os.getcwd())\nimport lockrelay\n"
                 "sys.exit(0 if lockrelay.ask(3, 7, 30.0) == 5 else 1)\n")
        server = ("import os, sys\nsys.path.insert(0, os.getcwd())\nimport numpy as np, lockrelay\n"
                  "right = lambda T, S: np.tril(np.ones((T, S), bool), k=S - T)\n"
                  "lockrelay.serve(right, 30.0)\n")
        limits = Limits()
        children = [spawn(["-c", asker], scratches[0], limits), spawn(["-c", server], scratches[1], limits)]
        assert children[0].proc.wait(timeout=60) is not None
        assert exit_status(children[0]) == 0, scratches[0].output_tail()
    finally:
        for child in children:
            kill(child)
        for scratch in scratches:
            scratch.remove()


@pytest.mark.slow
def test_own_tests_relaying_to_a_top_left_mask_give_it_nothing(submission):
    needs_bwrap()
    root = submission({"decode_mask/decode_mask.py": RELAYING_MODULE, "decode_mask/lockrelay.py": LOCK_RELAY,
                       "decode_mask/test_decode_mask.py": RELAY_TEST,
                       "tile_classification.py": catalog.get("tile_classification").reference_path.read_text()})
    result = engine.grade(root, ["decode_mask", "tile_classification"], seed=3)
    ex = result.exercise("decode_mask")
    assert ex.level == "weak" and "top_left_alignment" in {d.id for d in ex.diagnoses}
    assert ex.own_tests["set_aside"] == ["test_the_relay_reached_the_candidate"]  # it never saw a request
    assert result.exercise("tile_classification").level == "strong_hire"  # graded beside it, unharmed


def test_own_test_runs_never_overlap_and_the_reference_runs_last(monkeypatch, tmp_path):
    """The order and the overlap, from the runs themselves: each records when it began and ended."""
    spans = {}

    def recorded(test_file, implementation, exercise, limits, timeout=0.0, seed=0, read_only=False):
        began = time.monotonic()
        time.sleep(0.05)
        spans[implementation, read_only] = (began, time.monotonic())
        return own_tests.OwnTestsRun("ran", {"test_x": "passed"})

    monkeypatch.setattr(own_tests, "run", recorded)
    sandbox = Sandbox(ModuleToLoad("decode_mask", [], []), Limits())  # never started: only its time budget
    runs = own_tests.run_all(DECODE_MASK, tmp_path / "test_decode_mask.py", sandbox, Limits())
    assert list(runs) == list(own_tests.variants(DECODE_MASK))
    ordered = sorted(spans.values())
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered))
    last_two = sorted(spans, key=lambda run: spans[run][0])[-2:]  # the reference, as it is and read-only
    assert sorted(last_two) == [(DECODE_MASK.reference_path, False), (DECODE_MASK.reference_path, True)]


# -- tests chosen by the reference ----------------------------------------------------------

def _every_mask_test(T: int, S: int) -> str:
    """One test per possible T x S mask: the reference passes exactly one of them."""
    masks = [np.array(bits, bool).reshape(T, S).tolist() for bits in itertools.product([0, 1], repeat=T * S)]
    return ("import numpy as np\nimport pytest\nfrom decode_mask import decode_causal_mask\n\n"
            f"@pytest.mark.parametrize('mask', {masks!r})\n"
            "def test_mask(mask):\n"
            f"    assert decode_causal_mask({T}, {S}).tolist() == mask\n")


@pytest.mark.slow
def test_a_suite_of_every_possible_mask_is_capped_at_hire(submission):
    root = submission({"decode_mask.py": DECODE_MASK.reference_path.read_text(),
                       "test_decode_mask.py": _every_mask_test(2, 3)})
    ex = engine.grade(root, ["decode_mask"], seed=4).exercise("decode_mask")
    assert ex.own_tests["caught"] == ["top_left_past_one_query"]  # the one kept test: only the (2, 3) mistake
    assert len(ex.own_tests["set_aside"]) == 63 and "mask0" in ex.own_tests["set_aside"][0]
    score = {c.id: c for c in ex.checks}["own_tests_mutation_score"]
    assert not score.passed and "63 of your tests fail on a correct implementation" in score.message
    assert ex.level == "hire"


def test_two_tests_set_aside_keep_the_score_and_three_do_not(monkeypatch):
    from grader.checking import CheckFailure
    from grader.own_tests import OwnTestsRun

    section = own_tests.declaration(DECODE_MASK)
    failing = {v: "failed" for v in section.scored}

    def ex_with(set_aside: int):
        tests = {"test_kept": "passed", **{f"test_odd{i}": "failed" for i in range(set_aside)}}
        runs = {"reference": OwnTestsRun("ran", tests)}
        runs.update({v: OwnTestsRun("ran", {"test_kept": failing[v]}) for v in section.scored})
        return type("Ex", (), {"exercise": DECODE_MASK, "own_tests": runs, "own_tests_path": __file__})()

    own_tests.check_own_tests_mutation_score(ex_with(2))
    with pytest.raises(CheckFailure, match="3 of your tests fail on a correct implementation"):
        own_tests.check_own_tests_mutation_score(ex_with(3))


def test_at_the_uid_level_the_implementation_folder_is_its_own_uids(tmp_path):
    """The tests' process runs under another fresh uid, beside the implementation it calls."""
    from grader.sandbox import relay
    from grader.sandbox.launch import Scratch
    from tests.test_platforms_secrets import (
        needs_root_to_setuid,
        readable_by_a_fresh_uid,
    )

    needs_root_to_setuid()
    served = relay.Implementation("decode_mask", DECODE_MASK.reference_path, [], {}, Limits())
    scratch = Scratch(prefix="kvgrade-uid-test-")
    scratch.add_files("candidate", [("decode_mask.py", DECODE_MASK.reference_path)])
    child = type("Child", (), {"uid": 1_960_000_123})()
    served.worker.stop()  # never launched: this removes the scratch it made, which the stand-in below replaces
    served.worker = type("Worker", (), {"launch": lambda self: None, "child": child, "scratch": scratch})()
    try:
        assert scratch.root / "candidate" / "decode_mask.py" in readable_by_a_fresh_uid(scratch.root)  # as it was
        served.launch()
        assert readable_by_a_fresh_uid(scratch.root) == []
        assert scratch.root.stat().st_gid == child.uid and scratch.root.stat().st_mode & 0o777 == 0o750
    finally:
        scratch.remove()
