"""expect_rejected and the child's limits say what a call did (issue 21 class 6, issue 24 item 7)."""
import numpy as np
import pytest

from grader.checking import CheckFailure, ExerciseRun, expect_raises, expect_rejected
from grader.sandbox import CandidateRaised, Limits, ModuleToLoad, Sandbox

LIMITS = Limits()


def _raising(type_name, *mro, message="bad n"):
    def call(*args, **kwargs):
        raise CandidateRaised("f()", {"type": type_name, "mro": [type_name, *mro], "message": message}, LIMITS)
    return call


def _rejected(fn):
    ex = ExerciseRun(None, 0, None, None)
    with pytest.raises(CheckFailure) as failure:
        expect_rejected(ex, fn, -1, call="f(-1)", diagnosis="accepts_invalid_sizes")
    return failure.value, ex.diagnoses


@pytest.mark.parametrize("type_name, mro", [("AttributeError", ()), ("IndexError", ("LookupError",))])
def test_falling_over_on_bad_arguments_is_missing_validation_said_as_it_happened(type_name, mro):
    """Issue 22: validating less caps at hire, whatever error the unvalidated code meets; the
    sentence says what the call raised, never that it gave a plausible answer."""
    failure, named = _rejected(_raising(type_name, *mro, "Exception"))
    assert failure.kind == "hygiene" and list(named) == ["accepts_invalid_sizes"]
    assert failure.message.startswith(f"f(-1) raised {type_name}") and "not validated" in failure.message
    assert f"raised {type_name} instead of ValueError" in named["accepts_invalid_sizes"].message


def test_a_function_not_implemented_is_a_crash_not_an_accepted_argument():
    failure, named = _rejected(_raising("NotImplementedError", "RuntimeError", "Exception"))
    assert failure.kind == "crash" and named == {}
    assert failure.message.startswith("f(-1) crashed with NotImplementedError")


def test_a_rejection_in_the_wrong_class_is_hygiene_and_names_nothing():
    failure, named = _rejected(_raising("TypeError", "Exception"))
    assert failure.kind == "hygiene" and named == {}
    assert failure.message.startswith("f(-1) raised TypeError") and "expected ValueError" in failure.message


@pytest.mark.parametrize("type_name, mro, message, bound", [
    ("BlockingIOError", ("OSError",), "[Errno 11] Resource temporarily unavailable",
     f"the limit of {LIMITS.processes} processes and threads"),
    ("RuntimeError", (), "can't start new thread", f"the limit of {LIMITS.processes} processes and threads"),
    ("MemoryError", (), "", f"the memory limit of {LIMITS.memory_bytes >> 20} MiB"),
    ("OSError", (), "[Errno 27] File too large", f"the file size limit of {LIMITS.output_bytes >> 20} MiB")])
def test_a_limit_reached_is_named_with_its_value(type_name, mro, message, bound):
    failure, named = _rejected(_raising(type_name, *mro, message=message))
    assert failure.kind == "crash" and named == {} and bound in failure.message
    with pytest.raises(CheckFailure) as raised:
        expect_raises(_raising(type_name, *mro, message=message), call="f()")
    assert bound in raised.value.message


def test_a_returned_value_is_an_accepted_argument():
    failure, named = _rejected(lambda n: np.zeros(2))
    assert failure.kind == "hygiene" and "accepts_invalid_sizes" in named
    assert failure.message.startswith("f(-1) returned a float64 array")


FORKS = '''
import os, time
def f(n):
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
    return n
'''


@pytest.mark.slow
def test_the_process_limit_is_named_by_the_real_sandbox():
    """A submission that forks past the limit: the message names the limit and its value."""
    sandbox = Sandbox(ModuleToLoad("forks", [("forks.py", FORKS.encode())], []), Limits(processes=16))
    try:
        with pytest.raises(CandidateRaised) as raised:
            sandbox.module.f(1)
    finally:
        sandbox.close()
    assert raised.value.bound == "the limit of 16 processes and threads", str(raised.value)
    assert "it reached the limit of 16 processes and threads" in str(raised.value)


BOUNDS = b'''
import numpy as np

def big():
    return np.ones(3 << 28).sum()  # 6 GiB of float64: past the memory limit

def write():
    with open("out.bin", "wb") as fh:
        fh.write(b"x" * (9 << 20))  # past the file size limit
'''


@pytest.mark.slow
@pytest.mark.parametrize("name, bound", [("big", f"the memory limit of {LIMITS.memory_bytes >> 20} MiB"),
                                         ("write", f"the file size limit of {LIMITS.output_bytes >> 20} MiB")])
def test_the_memory_and_file_size_limits_are_named_by_the_real_sandbox(name, bound):
    sandbox = Sandbox(ModuleToLoad("bounds", [("bounds.py", BOUNDS)], []), LIMITS)
    try:
        with pytest.raises(CandidateRaised) as raised:
            getattr(sandbox.module, name)()
    finally:
        sandbox.close()
    assert raised.value.bound == bound, str(raised.value)
