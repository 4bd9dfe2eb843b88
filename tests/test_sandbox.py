"""Candidate code runs in a child; its faults become one clear line and never reach the grader."""
import contextlib
import dataclasses
import functools
import subprocess
import os
import sys
import time

import numpy as np
import pytest

from grader.sandbox import (BadValue, CandidateCrashed, CandidateLoadError, CandidateRaised,
                            CandidateTimeout, CandidateUnavailable, Lent, Limits, ModuleToLoad, Sandbox)
from grader.sandbox import wire
from grader.sandbox.launch import TAIL_BYTES

FAULTS = '''
import os, sys, time
import numpy as np

def ok(n):
    return np.arange(n)

def hang():
    while True:
        pass

def segfault():
    import ctypes
    ctypes.string_at(0)

def hard_exit():
    os._exit(0)

def soft_exit():
    sys.exit(3)

def flood():
    for _ in range(50_000):  # about 20 MB, past the 8 MiB output cap
        print("x" * 200)
        print("y" * 200, file=sys.stderr)
    return "done"

def eat_memory(n):
    return np.ones((n,), dtype=np.uint8).sum()

def returns_object():
    return object()

def returns_object_array():
    return np.array([object()], dtype=object)

def use_source(src):
    k, v = src.load(1, 3)
    return len(src), src.positions, k, v

def warns():
    np.ones(2) / np.zeros(2)
    return 1

def grab(n):
    return [1.5, "text", (True, None), {"a": np.float32(2.5)}]
'''


@pytest.fixture
def sandbox(tmp_path):
    path = tmp_path / "faulty.py"
    path.write_text(FAULTS)
    box = Sandbox(ModuleToLoad("faulty", [path], []), Limits(call_seconds=2, max_faults=10))
    yield box
    box.close()


def test_values_come_back_as_data(sandbox):
    assert np.array_equal(sandbox.module.ok(5), np.arange(5))
    value = sandbox.module.grab(0)
    assert value[:2] == [1.5, "text"] and value[2] == (True, None)
    assert value[3]["a"] == np.float32(2.5) and isinstance(value[3]["a"], np.float32)


REBINDS = """
import numpy as np

LIMIT = 7

def first(n):
    global first
    first = second  # the module's function from now on
    return np.arange(n)

def second(n):
    return -np.arange(n)
"""


def test_a_module_function_is_called_by_name_in_one_request(tmp_path):
    """After the first read of a callable off the module, ``module.f(...)`` is one request that
    reads ``f`` in the child as it calls: a function the module rebinds is the one called, a
    value stays a value, a child restarted after a fault reads its functions afresh, and no
    handle is left for the child to drop."""
    from grader.sandbox.remote import ModuleFunction

    (tmp_path / "rebinds.py").write_text(REBINDS)
    box = Sandbox(ModuleToLoad("rebinds", [tmp_path / "rebinds.py"], []), Limits(call_seconds=5, max_faults=5))
    ops = []
    real = box.request

    def counted(obj, header, *args, **kwargs):
        ops.append(header["op"])
        return real(obj, header, *args, **kwargs)

    box.request = counted
    try:
        assert box.module.LIMIT == 7 and box.module.LIMIT == 7  # values: read each time
        assert np.array_equal(box.module.first(3), np.arange(3))
        fn = box.module.first
        assert isinstance(fn, ModuleFunction) and repr(fn) == "<candidate first>"
        assert np.array_equal(fn(3), -np.arange(3))  # the module rebound first: its new function answers
        assert np.array_equal(box.module.first(2), -np.arange(2))
        assert ops == ["getattr", "getattr", "getattr", "call", "call", "call"]
        assert box.recorded["first"][-1].what.startswith("first(")  # recorded under the module's name
        box._fault(CandidateCrashed("the child died"))  # a restart: a function of the old child is refused
        with pytest.raises(CandidateUnavailable):
            fn(1)
        assert np.array_equal(box.module.first(2), np.arange(2))  # the new child's module, read afresh
        assert not box._released
    finally:
        box.close()


def test_a_child_let_go_is_not_waited_for_a_later_call_starts_a_fresh_one_and_close_reaps_both(sandbox):
    """``let_go`` (the order check's fresh process, a measured floor) asks the child to exit and
    returns at once; the sandbox's close waits for it and removes its scratch, as for its own child."""
    assert np.array_equal(sandbox.module.ok(3), np.arange(3))
    first = sandbox.worker
    sandbox.let_go()
    assert sandbox.worker is None and first.state.value == "ready"  # asked to exit, not stopped here
    assert np.array_equal(sandbox.module.ok(2), np.arange(2))  # a fresh child answers
    second = sandbox.worker
    assert second is not first and second.child.pid != first.child.pid
    sandbox.close()
    for worker in (first, second):
        assert worker.state.value == "stopped" and worker.child.returncode is not None
        assert not worker.scratch.root.exists()


@pytest.mark.slow
def test_a_hang_is_stopped_at_the_deadline_and_the_next_call_works(sandbox):
    with pytest.raises(CandidateTimeout, match="did not finish within 2 s"):  # the deadline ended it
        sandbox.module.hang()
    assert list(sandbox.module.ok(3)) == [0, 1, 2]


STARVED = """
import os, time

def work(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return 1

def starve_myself(seconds):
    os.nice(19)
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("19")
    except OSError:
        pass
    return work(seconds)
"""


@contextlib.contextmanager
def one_busy_core(box):
    """``box``'s child, started here, and three busy processes on one core; this process keeps every
    core. Each burner leads a session of its own, as a sandbox child does: the kernel shares a core
    between sessions first, so burners of the test's own session would take half the core however
    many they were."""
    cores, burners = os.sched_getaffinity(0), []
    os.sched_setaffinity(0, {min(cores)})  # what starts now inherits the one core
    try:
        burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                   for _ in range(3)]
        box.module.work(0.01)  # the child starts, and loads before any clock starts
        os.sched_setaffinity(0, cores)  # the grader's own waits are not starved
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
        os.sched_setaffinity(0, cores)


def test_a_call_a_busy_machine_starves_is_not_timed_out(tmp_path):
    """The deadline is the child's own time: a call that needs 0.3 s of CPU, sharing its one core with
    three busy processes, takes 1.2 s or more on the clock, past its 1 s deadline, and still returns;
    the exercise's budget is charged the child's own time, so three such calls fit in 2.5 s. A load
    on the grading machine never turns a slow answer into a hang."""
    path = tmp_path / "starved.py"
    path.write_text(STARVED)
    box = Sandbox(ModuleToLoad("starved", [path], []), Limits(call_seconds=1.0, load_seconds=30, exercise_seconds=60))
    with one_busy_core(box):
        try:
            box.limits = dataclasses.replace(box.limits, exercise_seconds=box.spent + 2.5)  # 2.5 s from here
            spent, began = box.spent, time.monotonic()
            assert box.module.work(0.3) == 1
            assert time.monotonic() - began > 1.0, "the call was not starved: the test proved nothing"
            assert [box.module.work(0.3) for _ in range(2)] == [1, 1]  # 3.6 s or more on the clock, in a 2.5 s budget
            assert 0.85 < box.spent - spent < 2.0  # charged its CPU time, not the machine's load
        finally:
            box.close()


def test_a_child_that_starves_itself_gets_no_longer_deadline(tmp_path):
    """A child that gives up its share (nice 19, its autogroup at nice 19) to stay runnable without
    using its CPU is stopped at its deadline, as a sleeping one is: it cannot hold the grader (red team 25)."""
    path = tmp_path / "starved.py"
    path.write_text(STARVED)
    box = Sandbox(ModuleToLoad("starved", [path], []), Limits(call_seconds=1.0, load_seconds=30))
    with one_busy_core(box):
        try:
            began = time.monotonic()
            with pytest.raises(CandidateTimeout, match="did not finish within 1 s; "):
                box.module.starve_myself(0.6)
            assert time.monotonic() - began < 3.5  # stretched: 4 s (a starved child dies slowly)
        finally:
            box.close()


@pytest.mark.parametrize("name,pattern", [
    ("segfault", "SIGSEGV"),
    ("hard_exit", "exited with status 0"),
])
def test_a_dying_child_is_reported_and_replaced(sandbox, name, pattern):
    with pytest.raises(CandidateCrashed, match=pattern):
        getattr(sandbox.module, name)()
    assert list(sandbox.module.ok(2)) == [0, 1]


def test_sys_exit_is_an_exception_like_any_other(sandbox):
    with pytest.raises(CandidateRaised, match="soft_exit\\(\\) raised SystemExit: 3"):
        sandbox.module.soft_exit()


def test_output_past_the_cap_is_dropped_and_the_writes_never_fail(tmp_path):
    path = tmp_path / "faulty.py"
    path.write_text(FAULTS)
    box = Sandbox(ModuleToLoad("faulty", [path], []), Limits(call_seconds=60))  # 20 MB of prints: slow under load
    try:
        assert box.module.flood() == "done"
        assert box.worker.output_truncated and box.worker.scratch.output.total > 16 << 20
        assert len(box.worker.scratch.output_tail(1 << 30)) <= TAIL_BYTES
    finally:
        box.close()
    assert box.output_note == "output truncated after 8 MiB"


@pytest.mark.slow
def test_memory_is_limited_just_over_the_limit(tmp_path):
    path = tmp_path / "faulty.py"
    path.write_text(FAULTS)
    box = Sandbox(ModuleToLoad("faulty", [path], []), Limits(memory_bytes=768 << 20))
    try:
        assert box.module.eat_memory(256 << 20) == 256 << 20  # well under: fine
        with pytest.raises(CandidateRaised, match="MemoryError"):
            box.module.eat_memory(800 << 20)  # just over the 768 MiB set
    finally:
        box.close()


def test_unreadable_values_are_refused(sandbox):
    value = sandbox.module.returns_object()
    assert repr(value) == "<candidate object>"  # a handle, not the object


def test_lent_objects_call_back_into_the_grader(sandbox):
    class Source(Lent):
        wire_type, wire_methods = "KVSource", ("load",)

        def __init__(self):
            self.loads = []

        def wire_attrs(self):
            return {"positions": np.arange(4, dtype=np.int64)}

        def wire_len(self):
            return 4

        def load(self, start, stop):
            self.loads.append((start, stop))
            return np.ones((stop - start, 2)), np.zeros((stop - start, 2))

    source = Source()
    n, positions, k, v = sandbox.module.use_source(source)
    assert n == 4 and list(positions) == [0, 1, 2, 3] and k.shape == (2, 2)
    assert source.loads == [(1, 3)]  # counted here, in the grader's process


def test_kit_helpers_are_importable_in_the_child(tmp_path):
    helper = tmp_path / "helperlib.py"
    helper.write_text("class Model:\n    def __init__(self, n):\n        self.n = n\n")
    module = tmp_path / "user.py"
    module.write_text("def size(model):\n    return model.n * 2\n")
    box = Sandbox(ModuleToLoad("user", [module], [helper]))
    try:
        model = box.helper("helperlib").Model(21)
        assert box.module.size(model) == 42
    finally:
        box.close()


@pytest.mark.slow
def test_faults_open_the_breaker(tmp_path):
    path = tmp_path / "faulty.py"
    path.write_text(FAULTS)
    box = Sandbox(ModuleToLoad("faulty", [path], []), Limits(call_seconds=1, max_faults=2))
    try:
        for _ in range(2):
            with pytest.raises(CandidateTimeout):
                box.module.hang()
        children = box.generation
        with pytest.raises(CandidateUnavailable, match="already failed 2 times"):
            box.module.ok(1)
        assert box.generation == children and box.worker is None  # refused without starting a child
    finally:
        box.close()


def test_an_import_error_is_one_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import numpy as np\nraise RuntimeError('boom at import')\n")
    box = Sandbox(ModuleToLoad("broken", [path], []))
    with pytest.raises(CandidateLoadError, match="importing broken.py raised RuntimeError: boom at import"):
        box.start()
    box.close()


def test_the_wire_never_unpickles():
    arrays = [np.array([object()], dtype=object)]
    with pytest.raises(wire.WireError):
        wire.pack({"value": {"$nd": 0}}, arrays)
    with pytest.raises(wire.WireError, match="Python objects"):
        wire.encode(arrays[0], [])


def test_the_wire_rejects_oversized_frames(monkeypatch):
    import os
    r, w = os.pipe()
    os.write(w, (wire.MAX_FRAME_BYTES + 1).to_bytes(8, "big"))
    with pytest.raises(wire.WireError, match="over the cap"):
        wire.read_frame(r)
    os.close(r)
    os.close(w)


def test_values_the_wire_does_not_carry_are_refused(sandbox):
    with pytest.raises(BadValue, match="returns_object_array\\(\\) returned a value the grader cannot read"):
        sandbox.module.returns_object_array()
    assert list(sandbox.module.ok(1)) == [0]


# -- a child that writes its own frames: the grader trusts nothing it reads -----------------
FORGER = '''
import os, struct, sys, threading, time
import numpy as np

OUT = int(sys.argv[2])
import importlib.util  # the kit's wire.py beside child.py (the child's own copy is out of reach)
_spec = importlib.util.spec_from_file_location("forged_wire", os.path.join(os.path.dirname(sys.argv[0]), "wire.py"))
wire = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wire)

def current_id():
    import gc
    return next(o for o in gc.get_objects() if type(o).__name__ == "Host").request_id

def raw(data):
    os.write(OUT, data)

def part(data):
    return struct.pack(">Q", len(data)) + data

def huge_length():
    raw(struct.pack(">Q", 1 << 62))
    time.sleep(5)

def nested_json():
    raw(part(b"[" * 100000 + b"]" * 100000))
    time.sleep(5)

def npy_bytes(a):
    import io
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()

def short_array():
    npy = npy_bytes(np.arange(10))
    raw(part(b'{"ok": true, "value": {"$nd": 0}, "arrays": 1}') + part(npy[:-8]))
    time.sleep(5)

def lying_shape():
    npy = npy_bytes(np.zeros(4)).replace(b"(4,)", b"(9999999999,)")
    raw(part(b'{"ok": true, "value": {"$nd": 0}, "arrays": 1}') + part(npy))
    time.sleep(5)

def npy_header(shape):
    import io
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buf.getvalue()

def negative_shape():
    """(-1, -8): a positive count of 8 matching the 64 bytes sent, which numpy cannot reshape to."""
    raw(part(b'{"ok": true, "value": {"$nd": 0}, "arrays": 1}') + part(npy_header((-1, -8)) + bytes(64)))
    time.sleep(5)

def unmakeable_shape():
    """No bytes, as (2**62, 0) announces, in a shape numpy cannot make."""
    raw(part(b'{"ok": true, "value": {"$nd": 0}, "arrays": 1}') + part(npy_header((2**62, 0, 2**62))))
    time.sleep(5)

def bad_tuple():
    raw(part(b'{"ok": true, "value": {"$tuple": 5}, "arrays": 0, "id": %d}' % current_id()))
    time.sleep(5)

def no_id():
    raw(part(b'{"ok": true, "value": 1, "arrays": 0}'))
    time.sleep(5)

def odd_error():
    raw(part(b'{"ok": false, "error": ["not", "a", "dict"], "warnings": 7, "arrays": 0, "id": %d}' % current_id()))
    time.sleep(5)

def odd_ok():
    raw(part(b'{"ok": "yes", "value": 1, "arrays": 0, "id": %d}' % current_id()))
    time.sleep(5)

def stray_frame():
    """One extra reply for this call: without ids, every later reply would shift by one."""
    raw(wire.pack({"ok": True, "value": "forged", "id": current_id()}, []))
    return "real"

def stop_reading():
    """Answer this call from a thread, then never read another request."""
    rid = current_id()
    threading.Thread(target=lambda: raw(wire.pack({"ok": True, "value": 1, "id": rid}, []))).start()
    time.sleep(3600)

def wrong_len():
    class Cache:
        def __len__(self):  # answers the grader's len() itself, with a str (the child's own len is out of reach)
            raw(part(b'{"ok": true, "value": "three", "arrays": 0, "id": %d}' % current_id()))
            time.sleep(5)
            return 3
    return Cache()

def echo(x):
    return x
'''


@pytest.fixture
def forger(tmp_path):
    path = tmp_path / "forger.py"
    path.write_text(FORGER)
    box = Sandbox(ModuleToLoad("forger", [path], []), Limits(call_seconds=2, max_faults=10))
    yield box
    box.close()


@pytest.mark.parametrize("name,pattern", [
    ("huge_length", "over the cap"),
    ("nested_json", "not JSON"),
    ("short_array", "carries"),
    ("lying_shape", "carries"),
    ("negative_shape", "negative length"),
    ("unmakeable_shape", "numpy cannot make"),
    ("bad_tuple", "tuple in a frame is not a list"),
    ("no_id", "out of turn"),
    ("odd_ok", "valid 'ok' field"),
])
def test_forged_frames_are_bad_values_not_grader_errors(forger, name, pattern):
    with pytest.raises(BadValue, match=pattern):  # at once: a deadline would be a CandidateTimeout
        getattr(forger.module, name)()
    assert forger.module.echo(3) == 3  # a fresh child


def test_a_forged_error_reply_is_sanitized(forger):
    with pytest.raises(CandidateRaised) as info:
        forger.module.odd_error()
    assert info.value.type_name == "Exception" and "not" in info.value.message


def test_warnings_come_back_with_the_call_that_raised_them(sandbox):
    value, stats = sandbox.module.with_stats("warns")
    assert value == 1 and stats.warnings == ["RuntimeWarning: divide by zero encountered in divide"]
    assert sandbox.module.with_stats("ok", 2)[1].warnings == []


def test_a_stray_frame_never_shifts_later_replies(forger):
    assert forger.module.stray_frame() == "forged"  # the candidate may lie about its own call
    with pytest.raises(BadValue, match="out of turn"):
        forger.module.echo(3)  # the real reply of the last call arrives: refused, not taken as 3's
    assert [forger.module.echo(n) for n in (4, 5)] == [4, 5]  # a fresh child, in step


def test_a_len_that_is_not_an_int_is_the_candidates_fault(forger):
    cache = forger.module.wrong_len()
    with pytest.raises(BadValue, match="expected an int"):
        len(cache)


@pytest.mark.slow
def test_a_child_that_stops_reading_cannot_block_the_grader(forger):
    assert forger.module.stop_reading() == 1
    with pytest.raises(CandidateTimeout):  # the write's deadline, not a grader blocked for good
        forger.module.echo(np.zeros(8 << 20))  # 64 MiB: more than a pipe holds


def test_the_wire_checks_shapes_dtypes_and_bytes_strictly():
    r, w = os.pipe()
    try:
        arr = np.arange(12, dtype=np.int32).reshape(3, 4)
        os.write(w, wire.pack({"value": {"$nd": 0}}, [np.asfortranarray(arr)]))
        header, arrays = wire.read_frame(r)
        assert arrays[0].dtype == np.int32 and arrays[0].shape == (3, 4)
        assert np.array_equal(arrays[0], arr) and arrays[0].flags.writeable
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(wire.WireError, match="nested more than"):
        wire.encode(functools.reduce(lambda acc, _: [acc], range(100), 0), [])
    with pytest.raises(wire.WireError, match="0-dimensional"):
        wire.decode({"$nd": 0, "scalar": True}, [np.ones(3)])


def test_an_exercise_has_a_time_budget(tmp_path):
    """Calls that each stay under the per-call limit still cannot add up to an unbounded run."""
    path = tmp_path / "slow.py"
    path.write_text("import time\ndef slow():\n    time.sleep(0.5)\n    return 1\n")
    box = Sandbox(ModuleToLoad("slow", [path], []), Limits(call_seconds=2, exercise_seconds=3.0))
    try:
        answers = []
        with pytest.raises(CandidateUnavailable, match="over this exercise's budget of 3 s"):
            for _ in range(20):
                answers.append(box.module.slow())
        assert len(answers) <= 6  # the import counts too, so a loaded machine gets fewer, never more
        with box.budgeted(60) as timeout:  # the candidate's own tests get nothing either
            assert timeout is None
    finally:
        box.close()


LENDER = '''
import os
import numpy as np

kept = []

def keep(a):
    kept.append(a)
    return float(a.sum())

def kept_sum():
    return float(kept[-1].sum())

def scribble(a):
    a[...] = -1.0

def shrink_the_memory():
    for fd in range(3, 64):
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
    return "tried"
'''


def test_a_lent_buffer_is_the_callers_own_memory_and_the_child_cannot_shrink_it(tmp_path):
    """A lent array is one memory seen by both sides: the grader's rewrite reaches a view the child
    kept, the child's write reaches the grader's read, and the child cannot shrink it under the
    grader (the memory is sealed, so reading it never faults)."""
    path = tmp_path / "lender.py"
    path.write_text(LENDER)
    box = Sandbox(ModuleToLoad("lender", [path], []), Limits(call_seconds=5))
    try:
        lent = box.lend(np.arange(6.0).reshape(2, 3))
        assert box.module.keep(lent) == 15.0
        lent.view[...] = 2.0  # the caller reuses its buffer
        assert box.module.kept_sum() == 12.0
        box.module.scribble(lent)
        assert (lent.read() == -1.0).all()
        assert box.module.shrink_the_memory() == "tried"
        assert lent.read().shape == (2, 3) and (lent.read() == -1.0).all()
        assert box.module.kept_sum() == -6.0
    finally:
        box.close()


def test_the_lent_memory_is_sealed_at_its_size():
    """Whoever holds the descriptor (the child has one until it maps it) cannot shrink or grow it."""
    from grader.sandbox.shared import Arena
    arena = Arena(1 << 20)
    try:
        for size in (0, 2 << 20):
            with pytest.raises(PermissionError):
                os.ftruncate(arena.fd, size)
    finally:
        arena.close_descriptor()


_CPU_TIME_PROBE = """
import os, sys, time
from grader.sandbox.launch import tree_cpu_seconds

def busy(seconds):
    began = time.process_time()
    while time.process_time() - began < seconds:
        pass

pid = os.getpid()
before = tree_cpu_seconds(pid)
time.sleep(0.3)
slept = tree_cpu_seconds(pid) - before
busy(0.3)
worked = tree_cpu_seconds(pid) - before - slept
child = os.fork()
if child == 0:
    busy(0.4)
    os._exit(0)
os.waitpid(child, 0)
reaped = tree_cpu_seconds(pid) - before - slept - worked
print(slept, worked, reaped)
"""


def test_cpu_time_counts_work_below_and_reaped_not_waiting():
    """The CPU time a work check reads: waiting costs none; work done by this process, or by a child
    it forked and then reaped (whose time the kernel moves to the parent's cutime), counts. Measured in
    a fresh process: the suite's own tree holds the background verify, whose work would count too."""
    probe = subprocess.run([sys.executable, "-c", _CPU_TIME_PROBE], capture_output=True, text=True,
                           timeout=120, check=True)
    slept, worked, reaped = map(float, probe.stdout.split())
    assert slept < 0.1 and worked >= 0.2 and reaped >= 0.3, (slept, worked, reaped)
