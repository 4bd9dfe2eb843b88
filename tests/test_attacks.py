"""Attacks on the grader's own process (issue 10), each run through the real grader on a real
submission folder: the attacker gets no level above weak, no hidden or host bytes reach any
output, nothing is written outside scratch, and the run ends in bounded time."""
import json
import os
import random
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from grader import catalog, engine
from grader.render import markdown, terminal
from grader.sandbox import (NOT_ISOLATED, IsolationError, Limits, ModuleToLoad, Sandbox, launch,
                            isolation_report, require_isolation)
from grader.submission import SubmissionError, has_modules, open_submission, skipped_links

KIT = catalog.KIT_ROOT
SOLUTIONS = KIT / "solutions"
HIDDEN_CHECKS = catalog.HIDDEN_ROOT / "decode_mask" / "checks.py"
FAST = Limits(call_seconds=5, load_seconds=10)
SECRET = "KVGRADE_ATTACK_SECRET_7f3a"  # planted in the grader's environment: must never show up


@pytest.fixture(autouse=True)
def planted_secret(monkeypatch):
    monkeypatch.setenv("KVGRADE_TEST_SECRET", SECRET)


def grade(folder, exercises=("decode_mask",), **kwargs):
    result = engine.grade(folder, list(exercises), seed=3, limits=FAST, **kwargs)
    text = json.dumps(result.to_dict())
    assert SECRET not in text, "the grader's environment leaked into the result"
    return result, text


def reference_with_tests(folder, eid="decode_mask"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{eid}.py").write_bytes((SOLUTIONS / f"{eid}.py").read_bytes())
    own = SOLUTIONS / f"test_{eid}.py"
    if own.is_file():
        (folder / own.name).write_bytes(own.read_bytes())
    return folder


def assert_refused(ex, words="link"):
    assert (ex.status, ex.level) == ("error", "weak"), (ex.status, ex.level, ex.error)
    assert words in ex.error and "\n" not in ex.error


@pytest.mark.parametrize("target", [
    pytest.param(lambda: SOLUTIONS / "decode_mask.py", id="the_reference"),
    pytest.param(lambda: "/proc/self/cwd/solutions/decode_mask.py", id="the_reference_via_proc_cwd"),
    pytest.param(lambda: "/proc/self/environ", id="the_grader_environment"),
    pytest.param(lambda: HIDDEN_CHECKS, id="the_hidden_checks"),
    pytest.param(lambda: "/dev/zero", id="dev_zero"),
])
def test_a_module_that_is_a_link_is_refused_before_any_read(tmp_path, monkeypatch, target):
    monkeypatch.chdir(KIT)  # /proc/self/cwd then leads into the kit, as when run from the checkout
    (tmp_path / "decode_mask.py").symlink_to(target())
    (tmp_path / "test_decode_mask.py").write_bytes((SOLUTIONS / "test_decode_mask.py").read_bytes())
    result, text = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"))
    assert "def check_" not in text and "np.arange(S - T, S)" not in text


def test_a_linked_exercise_folder_is_refused(tmp_path):
    (tmp_path / "decode_mask").symlink_to(SOLUTIONS)
    result, _ = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"))


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: p.symlink_to(HIDDEN_CHECKS), id="helper_links_to_hidden_checks"),
    pytest.param(lambda p: p.symlink_to("/dev/zero"), id="helper_links_to_dev_zero"),
    pytest.param(lambda p: p.mkdir(), id="folder_named_like_a_module"),
    pytest.param(lambda p: os.mkfifo(p), id="fifo_named_like_a_module"),
])
def test_a_file_beside_the_module_that_is_not_regular_refuses_the_exercise(tmp_path, make):
    folder = reference_with_tests(tmp_path / "decode_mask")
    make(folder / "notes.py")
    result, text = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"), "notes.py")
    assert "def check_" not in text


def test_a_linked_own_test_file_refuses_the_exercise(tmp_path):
    (tmp_path / "decode_mask.py").write_bytes((SOLUTIONS / "decode_mask.py").read_bytes())
    (tmp_path / "test_decode_mask.py").symlink_to(SOLUTIONS / "test_decode_mask.py")
    result, _ = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"), "test_decode_mask.py")


def test_a_module_that_is_a_fifo_is_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "decode_mask.py")
    result, _ = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"), "not a regular file")


@pytest.mark.slow
def test_links_elsewhere_are_skipped_listed_and_never_followed(tmp_path):
    reference_with_tests(tmp_path)
    (tmp_path / ".venv").symlink_to(KIT)
    (tmp_path / "notes").symlink_to("/proc/self/environ")
    result, _ = grade(tmp_path)
    assert result.exercise("decode_mask").level == "strong_hire"
    assert skipped_links(tmp_path) == [".venv", "notes"] == result.skipped_links
    assert "links in the submission, never followed: .venv, notes" in terminal.summary(result)


def test_the_reader_of_another_exercises_module_refuses_its_link_too(tmp_path):
    reference_with_tests(tmp_path)  # decode_mask itself is fine, but its sibling is a link
    (tmp_path / "tree_mask.py").symlink_to(SOLUTIONS / "tree_mask.py")
    result, _ = grade(tmp_path, ("decode_mask", "tree_mask"))
    assert_refused(result.exercise("tree_mask"))
    assert_refused(result.exercise("decode_mask"), "tree_mask.py")  # it would be copied beside it


# -- submissions as zips, and the single top folder ------------------------------------------


def zip_folder(folder, archive, prefix=""):
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, prefix + str(path.relative_to(folder)))
    return archive


@pytest.mark.slow
def test_a_returned_bundle_zip_is_graded_through_its_top_folder(tmp_path):
    work = reference_with_tests(tmp_path / "work" / "decode_mask")
    archive = zip_folder(work.parent, tmp_path / "candX.zip", prefix="bundle/")
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr("__MACOSX/bundle/._decode_mask.py", b"\0\0")
        zf.writestr(".DS_Store", b"junk")
    result, _ = grade(archive)
    assert result.exercise("decode_mask").level == "strong_hire"


@pytest.mark.slow
def test_a_folder_holding_one_top_folder_is_looked_through(tmp_path):
    reference_with_tests(tmp_path / "candX" / "bundle" / "decode_mask")
    (tmp_path / "candX" / ".DS_Store").write_text("junk")
    result, _ = grade(tmp_path / "candX")
    assert result.exercise("decode_mask").level == "strong_hire"
    assert has_modules(tmp_path / "candX")  # batch: one candidate, not a folder of them


def test_a_folder_of_candidates_stands_for_its_subfolders(tmp_path):
    reference_with_tests(tmp_path / "batch" / "alice")
    reference_with_tests(tmp_path / "batch" / "bob")
    assert not has_modules(tmp_path / "batch")
    assert has_modules(tmp_path / "batch" / "alice")


def test_a_folder_without_any_exercise_module_is_a_submission_error(tmp_path):
    (tmp_path / "README.md").write_text("nothing here")
    (tmp_path / "helper.py").write_text("x = 1")
    with pytest.raises(SubmissionError, match="holds no exercise module"):
        grade(tmp_path)


@pytest.mark.parametrize("name,data,attr,words", [
    ("../escape.py", b"x = 1", None, "outside its folder"),
    ("/abs/decode_mask.py", b"x = 1", None, "outside its folder"),
    ("decode_mask.py", b"/etc/passwd", 0o120777 << 16, "symbolic link"),
])
def test_a_zip_with_unsafe_entries_is_refused_and_writes_nothing(tmp_path, name, data, attr, words):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo(name)
        if attr is not None:
            info.external_attr = attr
        zf.writestr(info, data)
    with pytest.raises(SubmissionError, match=words):
        with open_submission(archive):
            pass
    assert not (tmp_path / "escape.py").exists()


def test_a_zip_bomb_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("grader.submission.MAX_ZIP_BYTES", 1 << 20)
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("decode_mask.py", b"#" * (4 << 20))
    with pytest.raises(SubmissionError, match="more than 1 MiB"):
        with open_submission(archive):
            pass


def test_an_unpacked_zip_is_removed_after_grading(tmp_path):
    archive = zip_folder(reference_with_tests(tmp_path / "w"), tmp_path / "c.zip")
    with open_submission(archive) as root:
        assert (root / "decode_mask.py").is_file()
    assert not root.exists()


# -- python -m grader inside a submission folder -----------------------------------------------


@pytest.mark.slow
def test_python_m_grader_in_a_submission_folder_does_not_import_its_modules(tmp_path):
    reference_with_tests(tmp_path)
    marker = tmp_path / "imported"
    for name in ("click", "jinja2"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('{name}')\n"
                                             "raise SystemExit('the candidate module ran in the grader')\n")
    env = dict(os.environ, PYTHONPATH=str(KIT))
    out = subprocess.run([sys.executable, "-m", "grader", "grade", "--seed", "0", ".", "-e", "decode_mask", "--json",
                          "-"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert not marker.exists()
    assert json.loads(out.stdout)["exercises"][0]["level"] == "strong_hire"


# -- the sandbox's own bounds, run through a real child ------------------------------------------

BOUNDS = '''
import os, random, sys, time
import numpy as np

def hashes():
    return [hash("kvgrade"), hash(("a", 1)), sorted({"x", "y", "z", "w"}, key=lambda s: hash(s))]

def draws():
    return random.random(), float(np.random.rand())

def fork_and_hold(n, each):
    """``n`` processes each touching ``each`` bytes at once: RLIMIT_AS alone counts one of them."""
    pids = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            block = np.ones(each, dtype=np.uint8)
            time.sleep(3)
            os._exit(0)
        pids.append(pid)
    return [os.waitpid(p, 0)[1] for p in pids]

def hold(each):
    return int(np.ones(each, dtype=np.uint8).sum())

def hold_in_a_fork(each):
    pid = os.fork()
    if pid == 0:
        block = np.ones(each, dtype=np.uint8)
        os._exit(0)
    os.waitpid(pid, 0)
    return 1

def many_processes(n):
    started = 0
    try:
        for _ in range(n):
            if os.fork() == 0:
                time.sleep(5)
                os._exit(0)
            started += 1
    except OSError:
        pass
    return started

def fill_scratch(limit):
    written = 0
    try:
        while written < limit:
            with open(f"blob{written}", "wb") as fh:
                fh.write(b"\\0" * (1 << 20))
            written += 1 << 20
    except OSError:
        pass
    return written

def listing():
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted(os.listdir(here)) + sorted(os.listdir("."))
'''


@pytest.fixture
def bounds(tmp_path):
    boxes = []

    def make(seed=0, **limits):
        (tmp_path / "bounds.py").write_text(BOUNDS)
        box = Sandbox(ModuleToLoad("bounds", [tmp_path / "bounds.py"], [], seed=seed),
                      Limits(call_seconds=20, max_faults=10, **limits))
        boxes.append(box)
        return box

    yield make
    for box in boxes:
        box.close()


def test_hashes_are_the_same_in_two_runs(bounds):
    assert bounds().module.hashes() == bounds().module.hashes()


def test_global_generators_replay_and_tell_nothing_of_the_grading_seed(bounds):
    """Red team 10: a one-way function of the grading seed was inverted by trying seeds (7 at once);
    the child's generators now start alike whatever the grading seed."""
    from grader.sandbox.policy import CHILD_SEED
    first, again, other = bounds(seed=7).module.draws(), bounds(seed=7).module.draws(), bounds(seed=8).module.draws()
    assert first == again == other
    assert first == (random.Random(CHILD_SEED).random(), float(np.random.RandomState(CHILD_SEED % 2**32).rand()))
    assert first != (random.Random(7).random(), float(np.random.RandomState(7).rand()))


@pytest.mark.slow
def test_an_unseeded_random_submission_gets_the_same_verdict_twice(tmp_path):
    (tmp_path / "decode_mask.py").write_text(
        "import numpy as np\n\ndef decode_causal_mask(T, S):\n"
        "    if not 1 <= T <= S:\n        raise ValueError('bad')\n"
        "    right = np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]\n"
        "    return right if np.random.rand() < 0.7 else np.tril(np.ones((T, S), dtype=bool))\n")
    from grader.sandbox.policy import CHILD_SEED as seed  # own tests: the same fixed seed as every child
    (tmp_path / "test_decode_mask.py").write_text(
        "import random\nimport numpy as np\n\ndef test_the_generators_start_from_the_seed():\n"
        f"    assert random.random() == {random.Random(seed).random()!r}\n"
        f"    assert np.random.rand() == {float(np.random.RandomState(seed % 2**32).rand())!r}\n")
    verdicts = []
    for _ in range(2):
        ex = grade(tmp_path)[0].exercise("decode_mask")
        verdicts.append([(c.id, c.passed, c.message) for c in ex.checks])
    assert verdicts[0] == verdicts[1]
    assert ("own_tests_pass_on_reference", True) in [v[:2] for v in verdicts[0]]  # seeded in the tests' child too


def test_no_pycache_is_written(bounds):
    assert not any("__pycache__" in name for name in bounds().module.listing())


@pytest.mark.slow
def test_memory_of_forks_is_bounded_together(bounds, cgroups):
    box = bounds(memory_bytes=1 << 30)
    statuses = box.module.fork_and_hold(3, 500 << 20)  # 1.5 GiB in all, 500 MiB each
    assert any(os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9 for s in statuses), statuses  # the kernel's OOM kill


def test_the_memory_peak_is_measured_by_the_grader_forks_included(bounds, cgroups):
    box = bounds()
    value, stats = box.module.measured("hold_in_a_fork", 300 << 20)
    assert value == 1 and stats.peak_source == "cgroup"
    _, small = box.module.measured("draws")  # the child's whole footprint: Python and numpy
    assert small.peak_bytes < 100 << 20
    assert 300 << 20 <= stats.peak_bytes - small.peak_bytes < 400 << 20


def test_the_memory_peak_falls_back_to_vmhwm_and_says_so(bounds, monkeypatch):
    monkeypatch.setenv("KVGRADE_CGROUPS", "off")
    box = bounds()
    _, own = box.module.measured("hold", 100 << 20)
    # pages the child had touched before the call may be reused: a few KiB under 100 MiB is fine
    assert own.peak_source == "vmhwm" and 99 << 20 <= own.peak_bytes < 200 << 20
    _, forked = box.module.measured("hold_in_a_fork", 100 << 20)
    assert forked.peak_source == "vmhwm" and forked.peak_bytes < 100 << 20  # it misses forks: said so


def test_processes_are_bounded_per_child(bounds, cgroups):
    started = bounds(processes=16).module.many_processes(200)
    assert started < 16


def test_scratch_is_size_capped_under_bubblewrap(bounds):
    if isolation_report()["scratch"] != "tmpfs":
        pytest.skip("scratch is a sized tmpfs only under bubblewrap")
    box = bounds(scratch_bytes=16 << 20)
    assert box.module.fill_scratch(64 << 20) <= 16 << 20
    assert sum(f.stat().st_size for f in box.worker.scratch.root.rglob("*") if f.is_file()) < 1 << 20


# -- files the child could swap, and the levels --------------------------------------------------

SWAPPER = '''
import os
here = os.getcwd()
for name in ("../output.log", "../junit.xml"):
    try:
        os.unlink(os.path.join(here, name))
    except OSError:
        pass
    try:
        os.symlink({reference!r}, os.path.join(here, name))
    except OSError:
        pass
try:
    os.mkfifo(os.path.join(here, "../output.log"))
except OSError:
    pass
print("last line before the crash")
'''


@pytest.mark.slow
def test_a_child_swapping_its_report_files_reads_nothing_back(tmp_path):
    reference = str(SOLUTIONS / "decode_mask.py")
    (tmp_path / "decode_mask.py").write_text("import os\n" + SWAPPER.format(reference=reference)
                                             + "\ndef decode_causal_mask(T, S):\n    os._exit(1)\n")
    (tmp_path / "test_decode_mask.py").write_text(SWAPPER.format(reference=reference)
                                                  + "\ndef test_nothing():\n    assert True\n")
    result, text = grade(tmp_path)
    ex = result.exercise("decode_mask")
    assert ex.level == "weak"
    assert "np.arange(S - T, S)" not in text and "decode_causal_mask(T, S):\n" not in text


def test_the_process_level_says_it_is_not_isolated_and_refuses_others_code():
    report = isolation_report(Limits(isolation="process"))
    assert report["level"] == "process" and report["warning"] == NOT_ISOLATED
    with pytest.raises(IsolationError, match="install bubblewrap"):
        require_isolation(False, Limits(isolation="process"))
    assert require_isolation(True, Limits(isolation="process")) == "process"


def test_an_installed_level_whose_probe_fails_is_an_error_not_a_downgrade(monkeypatch):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: nothing to fail")
    tries = []
    monkeypatch.setattr(launch, "_probe", lambda level: tries.append(level) or "it timed out")
    launch._failure.cache_clear()
    try:
        with pytest.raises(IsolationError, match="does not work here: it timed out"):
            launch.isolation_level(Limits(isolation="bwrap"))
        assert tries == ["bwrap", "bwrap"]  # retried once
    finally:
        launch._failure.cache_clear()


def test_the_isolation_report_names_each_bound():
    report = isolation_report()
    assert set(report) >= {"level", "memory", "pids", "scratch", "warning"}
    if report["level"] == "bwrap":
        assert report["root"] == "read-only" and report["warning"] is None


@pytest.mark.slow
def test_debug_prints_past_the_output_cap_keep_a_correct_verdict(tmp_path):
    """About 20 MB of prints per call: dropped past 8 MiB, never a failed write (issue 13.2)."""
    reference_with_tests(tmp_path)
    source = (SOLUTIONS / "decode_mask.py").read_text()
    signature = "def decode_causal_mask(T: int, S: int) -> np.ndarray:"
    assert signature in source
    (tmp_path / "decode_mask.py").write_text("import sys as _sys\n" + source.replace(
        signature, signature + "\n    _sys.stdout.write('debug ' * 3_500_000)\n    _sys.stdout.flush()", 1))
    assert "debug" in (tmp_path / "decode_mask.py").read_text()
    result, _ = grade(tmp_path)
    assert result.exercise("decode_mask").level == "strong_hire"
    assert result.exercise("decode_mask").output_note == "output truncated after 8 MiB"
    assert "output truncated after 8 MiB" in markdown.render(result)


def test_a_hard_link_to_the_kit_is_refused(tmp_path):
    try:
        os.link(HIDDEN_CHECKS, tmp_path / "decode_mask.py")
    except OSError as exc:  # another file system, or links not allowed here
        pytest.skip(f"cannot hard-link into {tmp_path} here: {exc.strerror}")
    result, text = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"), "hard link")
    assert "def check_" not in text


@pytest.mark.slow
def test_a_big_helper_is_left_out_but_a_big_module_is_refused(tmp_path):
    folder = reference_with_tests(tmp_path / "decode_mask")
    (folder / "data.py").write_bytes(b"#" * (2 << 20))
    assert grade(tmp_path)[0].exercise("decode_mask").level == "strong_hire"
    (folder / "decode_mask.py").write_bytes(b"#" * (2 << 20))
    assert_refused(grade(tmp_path)[0].exercise("decode_mask"), "KiB")


@pytest.mark.slow
def test_the_cli_grades_a_zip_and_refuses_a_folder_without_modules(tmp_path):
    from click.testing import CliRunner

    from grader.cli import main

    archive = zip_folder(reference_with_tests(tmp_path / "work"), tmp_path / "cand.zip", prefix="bundle/")
    out = CliRunner().invoke(main, ["grade", "--seed", "0", str(archive), "-e", "decode_mask", "--json", "-"])
    assert out.exit_code == 0 and json.loads(out.output)["exercises"][0]["level"] == "strong_hire"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no module here")
    out = CliRunner().invoke(main, ["grade", str(tmp_path / "empty")])
    assert out.exit_code == 2 and "holds no exercise module" in out.output and "Traceback" not in out.output
