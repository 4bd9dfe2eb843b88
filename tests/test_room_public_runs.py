"""A public-test run in the room is evidence the interviewer watches: its outcome, report and output come
from a process no candidate code runs in (the kit's tests, reaching the candidate's module through the relay)."""
from pathlib import Path

from grader.room import grading

ROOT = Path(__file__).resolve().parent.parent
NO_MASK = (ROOT / "solutions" / "mutants" / "decode_mask" / "no_mask.py").read_text()

# Red team 13: at exit, rewrite the JUnit file pytest was asked for (the grader's own inode), hide pytest's
# output and print a summary of four passes, then leave with status 0.
FORGE = '''

def _forge():
    import atexit, os, stat, sys
    junit = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml=")), None)
    kept = None
    for fd in range(3, 256):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                kept = os.dup(fd) if kept is None else kept
                os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
        except OSError:
            pass

    def done():
        if junit:
            with open(junit, "w") as f:
                f.write('<testsuites><testsuite><testcase classname="t" name="test_prefill_is_lower_triangular"/>'
                        '</testsuite></testsuites>')
        if kept is not None:
            os.write(kept, b"4 passed in 0.04s\\n")
        os._exit(0)
    atexit.register(done)


_forge()
'''


def _public_run(tmp_path, source: str) -> dict:
    (tmp_path / "decode_mask").mkdir(parents=True)
    (tmp_path / "decode_mask" / "decode_mask.py").write_text(source)
    return grading.public_tests(str(tmp_path), "decode_mask")


def test_a_module_cannot_forge_its_public_test_run(tmp_path, bwrap):
    honest = _public_run(tmp_path / "honest", NO_MASK)
    assert honest["exit"] == 1 and honest["tests"]["test_prefill_is_lower_triangular"] == "failed", honest
    assert honest["output"].splitlines()[-1].startswith("1 failed, 3 passed in"), honest["output"]
    forged = _public_run(tmp_path / "forged", NO_MASK + FORGE)  # it breaks its own wire: it never starts
    assert forged["exit"] != 0 and "passed" not in forged["tests"].values(), forged
    assert "4 passed" not in forged["output"], forged["output"]


def test_the_reference_passes_its_public_tests_through_the_relay(tmp_path, bwrap):
    run = _public_run(tmp_path, (ROOT / "solutions" / "decode_mask.py").read_text())
    assert run["exit"] == 0 and set(run["tests"].values()) == {"passed"} and len(run["tests"]) == 4, run
