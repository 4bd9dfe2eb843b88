"""OS isolation of candidate code: what a child can see and reach, at each level this machine has.

With bubblewrap present (CI installs it and sets KVGRADE_REQUIRE_BWRAP=1, which turns a skip
into a failure), a submission can read neither the references nor the hidden tests nor the
rubrics, cannot write outside its scratch directory, cannot reach the network, and every
process it starts dies with it. The plain "process" level is always tested too.
"""
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader import catalog, engine
from grader.sandbox import Limits, ModuleToLoad, Sandbox, launch, policy

KIT = catalog.KIT_ROOT


@functools.cache
def has_bwrap() -> bool:
    """Probed on first use, never at import."""
    return launch.isolation_level(Limits(isolation="bwrap")) == "bwrap"


def mount_points_for_python(folder: Path) -> set[str]:
    """Names bubblewrap must create inside ``folder`` to bind the Python the child runs (a venv
    inside the checkout, as the README's commands make): empty mount points, never kit files."""
    pythons = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    folder = folder.resolve()
    return {p.relative_to(folder).parts[0] for p in pythons if folder in p.parents}


def needs_bwrap():
    if has_bwrap():
        return
    if os.environ.get("KVGRADE_REQUIRE_BWRAP"):
        pytest.fail("KVGRADE_REQUIRE_BWRAP is set but bubblewrap is missing or does not work here")
    pytest.skip("bubblewrap is not installed or does not work here")


PROBE = '''
import os, socket, subprocess, sys

def can_read(path):
    try:
        with open(path, "rb") as fh:
            return len(fh.read(100)) > 0
    except OSError:
        return False

def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []

def can_write(path):
    try:
        with open(path, "w") as fh:
            fh.write("written by a candidate")
        return True
    except OSError:
        return False

def can_connect():
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=1).close()
        return True
    except OSError:
        return False

def processes():
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())

def escape(token, clean_env):
    """Start a grandchild in a session of its own that outlives this process unless killed."""
    env = {} if clean_env else None
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", token], env=env,
                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True
'''


@pytest.fixture
def probe(tmp_path):
    boxes = []

    def make(isolation):
        path = tmp_path / "probe.py"
        path.write_text(PROBE)
        box = Sandbox(ModuleToLoad("probe", [path], []), Limits(call_seconds=5, isolation=isolation))
        boxes.append(box)
        return box

    yield make
    for box in boxes:
        box.close()


SECRETS = [
    KIT / "solutions" / "decode_mask.py",
    KIT / "grader" / "hidden" / "decode_mask" / "oracle.py",
    KIT / "grader" / "hidden" / "decode_mask" / "checks.py",
    KIT / "rubrics" / "decode_mask.toml",
    KIT / "grader" / "sandbox" / "client.py",
]


def test_with_bubblewrap_the_kit_is_out_of_sight(probe, tmp_path):
    needs_bwrap()
    box = probe("bwrap")
    module = box.module
    assert box.start().isolation == "bwrap"
    for secret in SECRETS:
        assert secret.is_file()  # the grader sees it ...
        assert not module.can_read(str(secret)), f"the child read {secret}"  # ... the child does not
    for folder in (KIT, KIT / "solutions", KIT / "grader" / "hidden", KIT / "rubrics", Path("/work")):
        seen = set(module.listing(str(folder))) - mount_points_for_python(folder)
        assert not seen, f"the child listed {folder}: {sorted(seen)[:5]}"
    (tmp_path / "other_candidate_file.txt").write_text("not copied into the sandbox")
    assert not module.can_read(str(tmp_path / "other_candidate_file.txt"))
    # the grader's memory: no other process is visible, the grader's pid least of all
    assert os.getpid() not in module.processes() and len(module.processes()) <= 3
    assert not module.can_read(f"/proc/{os.getpid()}/environ")


def test_with_bubblewrap_writes_stay_in_scratch_and_there_is_no_network(probe, tmp_path):
    needs_bwrap()
    box = probe("bwrap")
    module = box.module
    outside = tmp_path / "planted.txt"
    assert not module.can_write(str(outside)) and not outside.exists()
    assert not module.can_write(str(KIT / "solutions" / "planted.py"))
    assert not module.can_write("/usr/lib/planted")
    assert module.can_write("scratch_file.txt")  # the working directory is the scratch dir
    assert module.can_write("/tmp/fine.txt")  # a private /tmp, gone with the child
    assert not Path("/tmp/fine.txt").exists()
    assert not module.can_connect()


def _alive_with(token: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                    if token.encode() in fh.read().split(b"\0"):
                        found.append(int(entry.name))
            except OSError:
                pass
    return found


def _wait_gone(token, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and _alive_with(token):
        time.sleep(0.05)
    return _alive_with(token)


@pytest.mark.parametrize("level,clean_env", [("bwrap", True), ("process", False)])
def test_a_grandchild_that_escapes_with_setsid_is_killed(probe, level, clean_env):
    """bwrap: its pid namespace dies with the child, whatever the grandchild did to its
    environment. process: the grandchild is found by the marker in its environment."""
    if level == "bwrap":
        needs_bwrap()
    box = probe(level)
    token = f"kvgrade-escapee-{os.getpid()}-{level}"
    assert box.module.escape(token, clean_env)
    deadline = time.monotonic() + 5
    while not _alive_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with(token), "the grandchild never started"
    box.close()
    assert _wait_gone(token) == []


def reference(submission):
    return submission({name: (KIT / "solutions" / name).read_text()
                       for name in ("decode_mask.py", "test_decode_mask.py")})


@pytest.mark.slow
def test_the_plain_path_can_be_forced_and_is_reported(submission):
    root = reference(submission)
    result = engine.grade(root, ["decode_mask"], limits=Limits(isolation="process"), seed=0)
    assert result.isolation == "process" and result.to_dict()["isolation"] == "process"
    assert result.exercise("decode_mask").level == "strong_hire"


def test_the_level_used_is_in_every_result(submission):
    root = reference(submission)
    result = engine.grade(root, ["decode_mask"], only_checks={"plain_decode"}, seed=0)
    assert result.isolation == launch.isolation_level() and result.isolation in launch.LEVELS
    if has_bwrap() and not os.environ.get("KVGRADE_ISOLATION"):
        assert result.isolation == "bwrap"  # the strongest level is the default


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="unknown isolation level"):
        launch.isolation_level(Limits(isolation="vm"))


def test_the_uid_level_when_root_without_bubblewrap(probe):
    """Runs where a fresh uid can start Python (the interpreter must be readable by others)."""
    if os.geteuid() != 0 or launch.isolation_level(Limits(isolation="uid")) != "uid":
        pytest.skip("the uid level is not available here (not root, or Python is not world-readable)")
    box = probe("uid")
    assert box.start().isolation == "uid"
    assert not box.module.can_write(str(KIT / "solutions" / "planted.py"))
    token = f"kvgrade-escapee-{os.getpid()}-uid"
    assert box.module.escape(token, True)  # a clean environment: found by its uid instead
    deadline = time.monotonic() + 5
    while not _alive_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with(token), "the grandchild never started"
    box.close()
    assert _wait_gone(token) == []


def test_bwrap_binds_only_what_python_needs_and_the_root_is_read_only(tmp_path):
    needs_bwrap()
    scratch = launch.Scratch()
    try:
        scratch.add_runtime()
        scratch.add_files("work", [("pytest.ini", b"[pytest]\n")])
        argv = Limits(scratch_bytes=1 << 20).bwrap_args(scratch)
    finally:
        scratch.remove()
    pairs = [(a, argv[i + 1]) for i, a in enumerate(argv[:-1])]
    binds = {target for flag, target in pairs if flag in ("--bind", "--ro-bind")}
    writable = {target for flag, target in pairs if flag == "--bind"}
    assert "/" not in binds and writable == {str(scratch.root / "junit.xml")}  # the one report file
    assert ("--tmpfs", str(scratch.root)) in pairs and ("--remount-ro", "/") in pairs
    assert ("--ro-bind", str(scratch.work / "pytest.ini")) in pairs  # prepared files: read-only
    assert not any(str(KIT) == b or str(KIT).startswith(b + "/") and b != "/usr" for b in binds)
    for flag in ("--unshare-all", "--die-with-parent", "--new-session"):
        assert flag in argv


def test_uid_level_mechanics_with_a_shell(tmp_path):
    """The uid level's pieces, with /bin/sh instead of Python (which may not be readable by a
    fresh uid here): the drop to an unprivileged uid, a network namespace of its own, and the
    kill by uid that catches a grandchild in a session of its own with a clean environment."""
    if os.geteuid() != 0:
        pytest.skip("only root can change uid")
    uid = 1_899_999_001
    token = f"kvgrade-uid-escapee-{os.getpid()}"
    shared = Path(tempfile.mkdtemp(prefix="kvgrade-uid-test-"))
    shared.chmod(0o777)
    script = (f"id -u > {shared}/uid; cat /proc/net/dev > {shared}/net; "
              f"setsid env -i /bin/sh -c 'sleep 120; :' {token} & sleep 120")
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True,
                            preexec_fn=launch._preexec(Limits(), "uid", uid, None))
    child = launch.Child(proc, "uid", uid, "", None, None)
    deadline = time.monotonic() + 5
    while not _alive_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with(token), "the grandchild never started"
    try:
        assert (shared / "uid").read_text().strip() == str(uid)
        interfaces = [line.split(":")[0].strip() for line in (shared / "net").read_text().splitlines()[2:]]
        assert interfaces in (["lo"], []), f"the child sees network interfaces {interfaces}"
    finally:
        launch.kill(child)
        shutil.rmtree(shared, ignore_errors=True)
    assert _wait_gone(token) == []


def test_with_bubblewrap_a_kit_inside_a_python_root_is_still_hidden(probe, monkeypatch):
    """Were the kit installed inside a folder Python needs (say, site-packages), its secret
    folders are covered by empty ones in the child."""
    needs_bwrap()
    roots = policy._python_roots()
    monkeypatch.setattr(policy, "_python_roots", lambda: roots + [str(KIT.parent)])
    box = probe("bwrap")
    module = box.module
    assert module.can_read(str(KIT / "pyproject.toml"))  # the folder is bound this time ...
    for secret in SECRETS:
        assert not module.can_read(str(secret)), f"the child read {secret}"  # ... its secrets are not


def test_waiting_for_a_child_keeps_popens_contract():
    """Child.wait sleeps on the exit itself (a pidfd; what that saves is in benchmarks/
    bench_grading.py) and keeps Popen's contract: the status once exited, TimeoutExpired while
    it still runs, and a second wait on a reaped child."""
    quick = launch.Child(subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"]),
                         "process", None, "", None, None)
    assert quick.wait(timeout=5) == 3 and quick.wait(timeout=5) == 3
    stuck = launch.Child(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                          start_new_session=True),  # a group of its own, as every child
                         "process", None, "", None, None)
    try:
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            stuck.wait(timeout=0.2)
        assert time.monotonic() - started >= 0.2 and stuck.returncode is None
    finally:
        launch.kill(stuck)
    assert stuck.returncode == -9
