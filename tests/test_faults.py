"""The fault catalogue: one tiny decode_mask submission per attack or accident.

Each is graded through the real engine, beside the reference module of another exercise, and
each asserts the faulty exercise's status and one-line message, and that the other exercise
keeps its verdict: no submission changes its own verdict or anyone else's, and none stops a
grading run. Attacks whose outcome depends on the isolation level assert what that level
promises (see the README's section on isolation).
"""
import functools
import os
import re
import time

import pytest

from grader import catalog, engine
from grader.sandbox import Limits, launch

KIT = catalog.KIT_ROOT
SOLUTIONS = str(KIT / "solutions")
SEED = 5
FAST = Limits(call_seconds=2, load_seconds=5)


@functools.cache
def level() -> str:
    """The isolation level here, probed on first use (never at import: a probe failing at
    collection would be an error instead of a test's failure)."""
    return launch.isolation_level(FAST)

OTHER_PREFERENCE = ("tree_mask", "gpt2_decode", "tile_classification", "nan_safe_softmax",
                    "ring_buffer_window", "fused_attention")

REFERENCE = '''
import numpy as np

def decode_causal_mask(T, S):
    if not (isinstance(T, int) and isinstance(S, int)) or not 1 <= T <= S:
        raise ValueError(f"need integers 1 <= T <= S, got T={T}, S={S}")
    return np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]
'''
TOP_LEFT = '''
import numpy as np

def decode_causal_mask(T, S):
    if not 1 <= T <= S:
        raise ValueError("bad sizes")
    return np.tril(np.ones((T, S), dtype=bool))
'''


def body(before: str, returns: str = "np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]") -> str:
    """A decode_causal_mask that does ``before`` and then returns ``returns``."""
    lines = "\n".join("    " + line for line in before.strip().splitlines())
    return ("import os, sys, time\nimport numpy as np\n\ndef decode_causal_mask(T, S):\n"
            "    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer)) and 1 <= T <= S):\n"
            "        raise ValueError('bad sizes')\n"
            "    T, S = int(T), int(S)\n"
            f"{lines}\n    return {returns}\n")


@pytest.fixture(scope="module")
def others(tmp_path_factory):
    """One other exercise whose reference reaches strong_hire right now (exercises are being added)."""
    present = {e.id for e in catalog.exercises()}
    for eid in (e for e in OTHER_PREFERENCE if e in present):
        ex = catalog.get(eid)
        if not ex.reference_path.is_file():
            continue
        folder = tmp_path_factory.mktemp(f"baseline-{eid}")
        _copy_reference(ex, folder)
        try:
            got = engine.grade(folder, [eid], seed=SEED, limits=FAST).exercise(eid)
        except Exception:  # noqa: BLE001  an exercise still being written
            continue
        if got.level == "strong_hire":
            return [ex]
    if present - {"decode_mask"}:
        pytest.fail(f"no other exercise's reference reaches strong_hire ({sorted(present)}): "
                    "the catalogue cannot show that other verdicts are kept")
    return []


def _copy_reference(ex, folder):
    (folder / ex.reference_path.name).write_text(ex.reference_path.read_text())
    own = ex.reference_path.with_name(f"test_{ex.id}.py")
    if own.is_file():
        (folder / own.name).write_text(own.read_text())


@pytest.fixture
def grade(tmp_path, others):
    def run(source: str, own_tests: bool = False, limits: Limits = FAST, with_others: bool = True,
            expect_level: str | None = None):
        folder = tmp_path / "submission"
        folder.mkdir()
        (folder / "decode_mask.py").write_text(source)
        if own_tests:
            (folder / "test_decode_mask.py").write_text((KIT / "solutions" / "test_decode_mask.py").read_text())
        chosen = others if with_others else []
        for ex in chosen:
            _copy_reference(ex, folder)
        result = engine.grade(folder, ["decode_mask"] + [e.id for e in chosen], seed=SEED, limits=limits)
        for ex in chosen:
            other = result.exercise(ex.id)
            assert (other.status, other.level) == ("graded", "strong_hire"), f"{ex.id} lost its verdict"
            assert all(c.passed for c in other.checks)
        mine = result.exercise("decode_mask")
        for c in mine.checks:  # every fault is one clear line
            assert "\n" not in c.message and "Traceback" not in c.message and len(c.message) < 600
        if mine.error:
            assert "\n" not in mine.error and "Traceback" not in mine.error
        assert result.isolation == (expect_level or level()) and result.seed == SEED
        return mine, result
    return run


def unharmed(ex) -> bool:
    """Every hidden check on the module passed (its own tests are left out to keep this file fast)."""
    return ex.status == "graded" and all(c.passed for c in ex.checks if not c.id.startswith("own_tests"))


def message(ex, check_id):
    return next(c.message for c in ex.checks if c.id == check_id)


# (name, source, own tests?, status, level, check id or "error", message pattern)
CATALOGUE = [
    ("memory_bomb", body(f"hog = np.ones(({Limits().memory_bytes + (64 << 20)},), dtype=np.uint8)"), False,
     "graded", "weak",
     "dtype_and_shape", r"decode_causal_mask\(1, 1\) raised MemoryError"),
    ("segfault", body("import ctypes\nctypes.string_at(0)"), False, "graded", "weak", "dtype_and_shape",
     r"the candidate process died during decode_causal_mask\(1, 1\): killed by SIGSEGV \(segmentation fault\)"),
    ("sys_exit", body("sys.exit(0)"), False, "graded", "weak", "dtype_and_shape",
     r"^decode_causal_mask\(1, 1\) raised SystemExit: 0 at decode_mask.py:\d+$"),
    ("os_exit_after_fake_result", body("print('PASSED: strong_hire, 10/10 checks', flush=True)\nos._exit(0)"),
     False, "graded", "weak", "dtype_and_shape",
     r"died during decode_causal_mask\(1, 1\): it exited with status 0 .*PASSED: strong_hire"),
    ("exception", body("raise RuntimeError('the candidate gave up')"), False, "graded", "weak",
     "dtype_and_shape",
     r"^decode_causal_mask\(1, 1\) raised RuntimeError: the candidate gave up at decode_mask.py:\d+$"),
    ("wrong_type_list", body("", "[[True] * S for _ in range(T)] if T * S < 1000 else None"), False,
     "graded", "weak", "dtype_and_shape",
     r"^decode_causal_mask\(1, 1\) returned a list of length 1; expected a numpy bool array of shape \(1, 1\), "
     r"and its values are right"),
    ("wrong_shape", body("", "np.ones((S, T), dtype=bool)"), False, "graded", "weak", "dtype_and_shape",
     r"returned a bool array of shape \(7, 3\); expected a bool array of shape \(3, 7\)"),
    ("broadcasting_shape", body("", "np.ones((1, S), dtype=bool)"), False, "graded", "weak", "dtype_and_shape",
     r"returned a bool array of shape \(1, 7\); expected a bool array of shape \(3, 7\)"),
    # the right mask in another dtype is a dtype slip (hygiene): it caps at hire, not weak
    ("wrong_dtype", body("", "(np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]).astype(np.int64)"), False,
     "graded", "hire", "dtype_and_shape", r"returned an int64 array of shape \(1, 1\); expected a bool array"),
    ("scalar_true", body("", "True"), False, "graded", "weak", "dtype_and_shape",
     r"^decode_causal_mask\(1, 1\) returned True; expected a numpy bool array of shape \(1, 1\)$"),
    ("none", body("", "None"), False, "graded", "weak", "dtype_and_shape",
     r"^decode_causal_mask\(1, 1\) returned None; expected a numpy bool array"),
    ("object_array", body("", "np.array([[object()]], dtype=object)"), False, "graded", "weak",
     "dtype_and_shape", r"returned a value the grader cannot read: an array of Python objects"),
    ("unreadable_object", body("", "object()"), False, "graded", "weak", "dtype_and_shape",
     r"returned an object of type object \(not data\); expected a numpy bool array"),
    ("syntax_error", "import numpy as np\ndef decode_causal_mask(T, S:\n    return 1\n", False, "error", "weak",
     "error", r"^importing decode_mask.py raised SyntaxError"),
    ("import_error", "import numpy as np\nimport kvgrade_no_such_package\n", False, "error", "weak", "error",
     r"^importing decode_mask.py raised ModuleNotFoundError: No module named 'kvgrade_no_such_package'"),
    ("hangs_at_import", "import time\ntime.sleep(3600)\n", False, "error", "weak", "error",
     r"^importing decode_mask did not finish within 5 s"),
    ("exits_at_import", "import os\nos._exit(3)\n", False, "error", "weak", "error",
     r"died during importing decode_mask: it exited with status 3"),
]


@pytest.mark.parametrize("name,source,own_tests,status,level,check,pattern", CATALOGUE,
                         ids=[c[0] for c in CATALOGUE])
@pytest.mark.slow
def test_fault(grade, name, source, own_tests, status, level, check, pattern):
    ex, result = grade(source, own_tests)
    assert (ex.status, ex.level) == (status, level)
    text = ex.error if check == "error" else message(ex, check)
    assert re.search(pattern, text), text


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["while True:\n    pass", "time.sleep(3600)"], ids=["busy", "sleep"])
def test_a_hang_is_bounded_in_time(grade, loop):
    """Two timeouts open the breaker: the rest of the exercise fails at once, not 1 s per call."""
    ex, _ = grade(body(loop), limits=Limits(call_seconds=1, load_seconds=5))
    assert (ex.status, ex.level) == ("graded", "weak")
    said = message(ex, "dtype_and_shape")  # a busy machine may stretch the wait of a busy loop (CallClock)
    assert said.startswith("decode_causal_mask(1, 1) did not finish within 1 s")
    assert said.endswith("; the candidate process was stopped")
    timeouts = [c for c in ex.checks if c.message.startswith("decode_causal_mask") and "did not finish" in c.message]
    assert len(timeouts) == 2
    assert sum(c.message.startswith("not run: the candidate's code already failed 2 times") for c in ex.checks) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["segfault", "os_exit_after_fake_result", "memory_bomb"])
def test_fatal_faults_at_the_plain_process_level(grade, name):
    """The same faults, with OS isolation switched off: the limits and the restart still hold."""
    _, source, own, status, level, check, pattern = next(c for c in CATALOGUE if c[0] == name)
    ex, result = grade(source, limits=Limits(call_seconds=2, load_seconds=5, isolation="process"),
                       with_others=False, expect_level="process")
    assert (ex.status, ex.level) == (status, level) and re.search(pattern, message(ex, check))


@pytest.mark.slow
def test_a_crash_restarts_the_child_for_the_next_check(grade):
    source = REFERENCE.replace('        raise ValueError(f"need integers 1 <= T <= S, got T={T}, S={S}")',
                               '        import ctypes; ctypes.string_at(0)')
    ex, _ = grade(source)
    assert "SIGSEGV" in message(ex, "rejects_invalid_sizes")
    passed = {c.id for c in ex.checks if c.passed}
    assert {"dtype_and_shape", "plain_decode", "random_shapes", "chunked_prefill"} <= passed


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_output_floods_are_capped_and_change_nothing(grade):
    source = body("for _ in range(300):\n    try:\n        print('x' * 4000)\n"  # 2.4 MB a call: 8 MiB in 4
                  "        print('y' * 4000, file=sys.stderr)\n    except OSError:\n        break")
    ex, _ = grade(source)
    assert unharmed(ex)
    assert ex.output_note == "output truncated after 8 MiB"  # the flood did pass the cap


@pytest.mark.slow
def test_forked_children_do_not_outlive_the_run(grade):
    token = f"kvgrade-forked-{os.getpid()}"
    # forks on its first 16 calls only: each sleeper holds a slot of the child's process limit
    # (64) until the run ends, and the checks make more calls than that
    source = body(f"""
decode_causal_mask.calls = getattr(decode_causal_mask, "calls", 0) + 1
if decode_causal_mask.calls <= 16 and os.fork() == 0:
    os.setsid()
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", "{token}"])""")
    ex, _ = grade(source)
    assert unharmed(ex)  # the forks changed nothing ...
    assert _wait_gone(token) == []  # ... and none of them is left


@pytest.mark.slow
def test_a_monkeypatched_numpy_and_pytest_fool_only_their_own_process(grade):
    source = '''
import numpy as np, pytest, sys, traceback
np.array_equal = lambda *a, **k: True
np.testing.assert_array_equal = lambda *a, **k: None
pytest.fail = lambda *a, **k: None
pytest.raises = lambda *a, **k: __import__("contextlib").nullcontext()
sys.excepthook = lambda *a: print("all checks passed")
traceback.print_exc = lambda *a, **k: None
''' + TOP_LEFT.replace("import numpy as np", "")
    ex, _ = grade(source)
    assert ex.level == "weak" and "top_left_alignment" in {d.id for d in ex.diagnoses}
    assert "differs from the expected mask" in message(ex, "random_shapes")


@pytest.mark.slow
def test_walking_gc_and_the_callers_frames_finds_no_answer(grade):
    source = '''
import gc, sys
import numpy as np

def decode_causal_mask(T, S):
    if not 1 <= T <= S:
        raise ValueError("bad sizes")
    for obj in gc.get_objects():  # an expected mask of this shape, anywhere in this process?
        if isinstance(obj, np.ndarray) and obj.shape == (T, S) and obj.dtype == bool:
            return obj
    frame = sys._getframe(1)
    while frame is not None:  # or in a caller's locals?
        for value in frame.f_locals.values():
            if isinstance(value, np.ndarray) and value.shape == (T, S):
                return value
        frame = frame.f_back
    return np.tril(np.ones((T, S), dtype=bool))
'''
    ex, _ = grade(source)
    assert ex.level == "weak" and "top_left_alignment" in {d.id for d in ex.diagnoses}


def promised_only_by_bwrap(what: str):
    """Skip, naming why, where the level in use does not promise ``what`` (README, isolation);
    KVGRADE_REQUIRE_BWRAP=1 (CI) makes it a failure instead."""
    if level() == "bwrap":
        return
    if os.environ.get("KVGRADE_REQUIRE_BWRAP"):
        pytest.fail(f"KVGRADE_REQUIRE_BWRAP is set but the level here is {level()}")
    pytest.skip(f"the {level()} level does not promise {what}; only bubblewrap does (README, isolation)")


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_reading_the_reference_from_disk(grade):
    """A module that answers with the kit's reference when it can read it, top-left otherwise.
    With bubblewrap the reference is out of reach, so the cheat fails; at the other levels the
    kit is readable, which is why they are only for code you trust."""
    promised_only_by_bwrap("that the kit is out of the candidate's reach")
    source = f'''
import numpy as np
try:
    with open({str(KIT / "solutions" / "decode_mask.py")!r}) as fh:
        STOLEN = {{}}
        exec(fh.read(), STOLEN)
except OSError:
    STOLEN = None

def decode_causal_mask(T, S):
    if STOLEN:
        return STOLEN["decode_causal_mask"](T, S)
    if not 1 <= T <= S:
        raise ValueError("bad sizes")
    return np.tril(np.ones((T, S), dtype=bool))
'''
    ex, result = grade(source)
    assert ex.level == "weak" and "top_left_alignment" in {d.id for d in ex.diagnoses}


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_writing_outside_the_scratch_dir(grade, tmp_path):
    if level() == "process":
        promised_only_by_bwrap("that nothing is written outside scratch")
    target = tmp_path / "planted_by_candidate.txt"  # tmp_path is root's and private: no fresh uid writes it
    source = body(f"""
try:
    open({str(target)!r}, "w").write("a fake result")
except OSError:
    pass""")
    ex, _ = grade(source)
    assert unharmed(ex)
    assert not target.exists()


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_opening_a_socket(grade):
    promised_only_by_bwrap("that there is no network (the uid level's own namespace is best effort)")
    source = body("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=1).close()")
    ex, _ = grade(source)
    assert re.search(r"^decode_causal_mask\(1, 1\) raised OSError: \[Errno 101\] Network is unreachable",
                     message(ex, "dtype_and_shape"))
    assert ex.level == "weak"


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_killing_the_grader_is_not_possible(grade):
    """At the process level a child could signal the grader (same user); that is why it is weak."""
    if level() == "process":
        pytest.skip("at the process level a child can signal the grader: see the README")
    source = body("import signal\nfor pid in (os.getppid(), 1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
                  "    except OSError:\n        pass", )
    ex, _ = grade(source)
    assert unharmed(ex)


@pytest.mark.slow  # grades several times
def test_same_submission_and_seed_same_verdicts_and_diagnoses_and_reproduce_runs(grade):
    """The same seed gives the same verdicts and diagnoses; a failing check's reproduce run
    (`kvgrade grade PATH -e ID --seed N --check CHECK`) fails the same way on its own."""
    first = grade(TOP_LEFT, with_others=False)[1]
    again = engine.grade(first.submission, ["decode_mask"], seed=SEED, limits=FAST)
    def keep(r):
        return [(e["id"], e["level"], [(c["id"], c["passed"], c["message"], c["case"]) for c in e["checks"]],
                 [(d["id"], d["message"]) for d in e["diagnoses"]]) for e in r["exercises"]]
    assert keep(first.to_dict()) == keep(again.to_dict())
    assert first.to_dict()["seed"] == again.to_dict()["seed"] == SEED
    failing = [c for c in first.exercise("decode_mask").checks if not c.passed and c.case]
    c = max(failing, key=lambda c: c.id == "random_shapes")  # seeded shapes: the interesting one
    alone = engine.grade(first.submission, ["decode_mask"], seed=SEED, only_checks={c.id}, limits=FAST)
    (only,) = alone.exercise("decode_mask").checks
    assert (only.id, only.passed, only.message, only.case) == (c.id, False, c.message, c.case)


@pytest.mark.slow  # four gradings, two of them with both cores taken
def test_same_seed_same_verdicts_on_an_idle_machine_and_with_both_cores_busy(tmp_path):
    """Nothing in a verdict depends on the machine's speed: memory is measured, not time, and the
    deadlines are far from an honest call's duration even when the cores are shared."""
    import shutil
    import subprocess
    import sys

    solutions = catalog.KIT_ROOT / "solutions"
    for ref in solutions.glob("*.py"):
        shutil.copyfile(ref, tmp_path / ref.name)
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    shutil.copyfile(solutions / "mutants" / "fused_attention" / "loads_every_tile.py", wrong / "fused_attention.py")
    shutil.copyfile(solutions / "mutants" / "gpt2_decode" / "softmax_max_per_head.py", wrong / "gpt2_decode.py")

    def verdicts():
        out = []
        for folder in (tmp_path, wrong):
            r = engine.grade(folder, ["fused_attention", "gpt2_decode"], seed=SEED).to_dict()
            out += [(e["id"], e["level"], e["status"], [(c["id"], c["passed"], c.get("kind")) for c in e["checks"]],
                     sorted(d["id"] for d in e["diagnoses"])) for e in r["exercises"]]
        return out

    idle = verdicts()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        busy = verdicts()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert idle == busy
    assert [v[1] for v in idle] == ["strong_hire", "strong_hire", "weak", "weak"]  # loading a skipped tile: must-not


def _wait_gone(token, seconds=5.0):
    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                        if token.encode() in fh.read().split(b"\0"):
                            alive.append(int(entry.name))
                except OSError:
                    pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


# -- bad input to the grader itself: a clear error and exit 2, never a traceback ------------

def _bad_inputs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00\x01 not text")
    folder_notes = tmp_path / "notes_folder"
    folder_notes.mkdir()
    cases = []
    if os.geteuid() != 0:  # root reads anything, so this case only exists for other users
        locked = tmp_path / "locked.toml"
        locked.write_text("[decode_mask]\n")
        locked.chmod(0)
        cases.append((["grade", SOLUTIONS, "--notes", str(locked)], "cannot read it"))
    return cases + [
        (["grade", str(tmp_path / "missing")], "does not exist"),
        (["grade", str(binary)], "is not a folder"),
        (["grade", str(empty)], "is empty"),
        (["grade", SOLUTIONS, "-e", "no_such_exercise"], "unknown exercise 'no_such_exercise'"),
        (["grade", SOLUTIONS, "--notes", str(tmp_path / "missing.toml")], "cannot read it"),
        (["grade", SOLUTIONS, "--notes", str(folder_notes)], "cannot read it"),
        (["grade", SOLUTIONS, "--notes", str(binary)], "not UTF-8 text"),
    ]


def test_an_unknown_isolation_level_is_a_usage_error(monkeypatch):
    from click.testing import CliRunner

    from grader.cli import main

    monkeypatch.setenv("KVGRADE_ISOLATION", "vm")
    out = CliRunner().invoke(main, ["grade", "--seed", "0", SOLUTIONS, "-e", "decode_mask"])
    assert out.exit_code == 2 and "unknown isolation level 'vm'" in out.output and "Traceback" not in out.output


def test_bad_input_to_the_grader_is_a_clear_error(tmp_path):
    from click.testing import CliRunner

    from grader.cli import main

    for args, expected in _bad_inputs(tmp_path):
        out = CliRunner().invoke(main, args)
        assert out.exit_code == 2, (args, out.output)
        assert expected in out.output and "Traceback" not in out.output, (args, out.output)
