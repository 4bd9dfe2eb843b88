"""The sandbox policy is one value: bubblewrap's arguments, the rlimits, the reported bounds and
the README's isolation table all follow it, and a child writes only where it says, as much as
it says. The interpreter is resolved once, so a relative one (`../venv/bin/python`) works."""
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from grader import catalog
from grader.sandbox import Limits, ModuleToLoad, Sandbox, isolation_report, launch, policy

KIT = catalog.KIT_ROOT
MiB = 1 << 20


def readme_row(level: str) -> str:
    rows = [line for line in (KIT / "README.md").read_text().splitlines() if line.startswith(f"| `{level}` |")]
    assert len(rows) == 1, f"the README's isolation table has {len(rows)} rows for {level}"
    return rows[0]


def test_the_readme_isolation_table_states_the_policy():
    """Where a bwrap child can write, and how much, and its memory and processes, as the policy says."""
    limits = Limits()
    row = readme_row("bwrap")
    stated = {("scratch" if place.startswith("scratch") else place): int(mib) * MiB
              for place, mib in re.findall(r"(scratch dir|/[\w/]+) \((\d+) MiB\)", row)}
    assert stated == limits.writable()
    assert f"{limits.memory_bytes >> 30} GiB" in row and f"{limits.processes} processes" in row
    assert f"more than {limits.processes} processes" in readme_row("uid")


def test_bubblewrap_arguments_follow_the_mounts(tmp_path):
    """Every tmpfs the policy lists is sized from its field; /dev/shm is sized after --dev."""
    limits = Limits(tmp_bytes=3 * MiB, shm_bytes=2 * MiB, scratch_bytes=5 * MiB)
    scratch = launch.Scratch()
    try:
        argv = limits.bwrap_args(scratch)
    finally:
        scratch.remove()
    if "--size" not in argv:
        pytest.skip("this bubblewrap has no --size: tmpfs sizes cannot be set")
    sized = {argv[i + 3]: int(argv[i + 1]) for i, a in enumerate(argv[:-3])
             if a == "--size" and argv[i + 2] == "--tmpfs"}
    assert sized == {"/tmp": 3 * MiB, "/dev/shm": 2 * MiB, str(scratch.root): 5 * MiB}
    assert argv.index("/dev/shm") > argv.index("--dev")


def test_rlimits_and_cgroup_limits_come_from_the_fields():
    limits = Limits(memory_bytes=3 << 30, open_files=99, cpu_seconds=7, processes=12)
    got = {which: (soft, hard) for which, soft, hard in limits.rlimits("uid")}
    assert got[resource.RLIMIT_AS] == (3 << 30, 3 << 30) and got[resource.RLIMIT_NOFILE] == (99, 99)
    assert got[resource.RLIMIT_CPU] == (7, 12) and got[resource.RLIMIT_NPROC] == (12, 12)
    assert resource.RLIMIT_NPROC not in {which for which, _, _ in limits.rlimits("bwrap")}  # shared uid there
    assert limits.cgroup_limits() == (3 << 30, 12)


def test_the_reported_bounds_carry_the_policy_numbers():
    report = isolation_report(Limits(memory_bytes=1 << 30))
    assert report["memory_bytes"] == 1 << 30
    if report["level"] == "bwrap" and report["scratch"] == "tmpfs":
        assert report["writable_bytes"] == Limits().writable()


WRITER = '''
import os

def fill(path, mib):
    """Write up to ``mib`` MiB to ``path``; how many MiB went in before a write failed."""
    written, chunk = 0, b"x" * (1 << 20)
    try:
        with open(path, "wb") as fh:
            for _ in range(mib):
                fh.write(chunk)
                fh.flush()
                written += 1
    except OSError:
        pass
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return written
'''


def test_a_bubblewrap_child_writes_only_where_the_policy_says_and_only_as_much(bwrap, tmp_path):
    (tmp_path / "writer.py").write_text(WRITER)
    limits = Limits(call_seconds=20, tmp_bytes=4 * MiB, shm_bytes=3 * MiB, scratch_bytes=5 * MiB)
    box = Sandbox(ModuleToLoad("writer", [tmp_path / "writer.py"], []), limits)
    try:
        module = box.module
        assert module.fill("/dev/shm/big", 16) <= 3  # 256 MiB went in here before the policy sized it
        assert module.fill("/tmp/big", 16) <= 4
        assert module.fill("big", 16) <= 5  # the scratch folder, the child's working directory
        for elsewhere in ("/usr/big", "/big", "/proc/big", str(tmp_path / "big")):
            assert module.fill(elsewhere, 1) == 0, elsewhere
    finally:
        box.close()


def test_a_relative_interpreter_path_is_resolved_once(bwrap, tmp_path):
    """`../venv/bin/python` from another folder: the child is started with the path the sandbox
    binds (it failed with "execvp ...: No such file" when passed on as given)."""
    here = tmp_path / "elsewhere"
    here.mkdir()
    relative = os.path.relpath(sys.executable, here)
    assert relative.startswith("..")
    probe = "from grader.sandbox import launch; print(launch.isolation_level())"
    run = subprocess.run([relative, "-c", probe], cwd=here, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(KIT)}, check=False)
    assert run.returncode == 0 and run.stdout.strip() == "bwrap", run.stderr[-2000:]


@pytest.mark.slow
def test_grading_with_a_relative_interpreter_path(bwrap, tmp_path):
    here = tmp_path / "elsewhere"
    here.mkdir()
    run = subprocess.run([os.path.relpath(sys.executable, here), "-m", "grader", "grade", str(KIT / "solutions"),
                          "-e", "decode_mask"], cwd=here, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(KIT)}, check=False)
    assert run.returncode == 0 and "strong hire" in run.stdout, run.stderr[-2000:]


def test_the_child_interpreter_is_one_resolved_path():
    assert os.path.isabs(policy.PYTHON) and ".." not in Path(policy.PYTHON).parts
    assert os.path.samefile(policy.PYTHON, sys.executable)
