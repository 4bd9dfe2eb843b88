"""Shared helpers for the kit's own tests."""
import os
import shutil
from pathlib import Path

import pytest

from grader import catalog
from grader.sandbox import Limits, launch
from grader.verify import outcomes

from . import background

EXAMPLES = Path(__file__).parent / "examples"


@background.job("kit_outcomes")
def _verify_the_kit(_earlier):
    return outcomes(seed=background.VERIFY_SEED)


def pytest_collection_modifyitems(items):
    """The tests that judge a background job run last, in the jobs' order: the rest runs beside the jobs."""
    jobs = list(background.JOBS)

    def waits_for(item):
        return max((jobs.index(n) + 1 for n in getattr(item, "fixturenames", ()) if n in jobs), default=0)

    items.sort(key=waits_for)


def pytest_configure(config):
    """``-n`` (pytest-xdist) is for the fast loop: each worker is a session of its own, so on the slow tier
    each would start the whole-kit verify, itself a pool over every core."""
    spread = config.getoption("numprocesses", None) and not os.environ.get("PYTEST_XDIST_WORKER")
    if spread and "not slow" not in (config.getoption("markexpr", "") or ""):
        raise pytest.UsageError("-n is for the fast loop (-m 'not slow and not browser' -n 2): the slow tier "
                                "runs its own pools on every core")


def pytest_collection_finish(session):
    background.start({n for item in session.items for n in getattr(item, "fixturenames", ())})


def pytest_sessionfinish(session):
    background.stop()


@pytest.fixture(scope="session")
def verify_seed():
    """The seed of the suite's one verify run."""
    return background.VERIFY_SEED


@pytest.fixture(scope="session")
def kit_outcomes():
    """Every outcome of one verify run over the whole kit (started in the background when the session
    began): test_verify judges them, and the diagnosis-stability test reruns each mutant's failing
    checks at other seeds."""
    return background.result("kit_outcomes")


@pytest.fixture
def top_left_example(tmp_path_factory):
    """A classic weak submission, built from the kit's mutants: a top-left mask and tests that
    only try shapes where top-left agrees with the right answer."""
    root = tmp_path_factory.mktemp("top_left")
    mutants = catalog.KIT_ROOT / "solutions" / "mutants" / "decode_mask"
    shutil.copyfile(mutants / "top_left.py", root / "decode_mask.py")
    shutil.copyfile(mutants / "t1_only_tests" / "test_decode_mask.py", root / "test_decode_mask.py")
    return root


@pytest.fixture
def submission(tmp_path):
    """Build a submission folder: ``submission({"decode_mask.py": "source", ...})``."""
    def build(files: dict, copy_references: bool = False):
        if copy_references:
            for ex in catalog.exercises():
                shutil.copyfile(ex.reference_path, tmp_path / ex.reference_path.name)
        for name, source in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
        return tmp_path
    return build


@pytest.fixture
def bwrap():
    """For tests that need bubblewrap: a skip that names why where it does not work here, a
    failure where CI requires it (KVGRADE_REQUIRE_BWRAP). Probed when a test asks, never at import."""
    if launch.isolation_level(Limits(isolation="bwrap")) == "bwrap":
        return "bwrap"
    if os.environ.get("KVGRADE_REQUIRE_BWRAP"):
        pytest.fail("KVGRADE_REQUIRE_BWRAP is set but bubblewrap is missing or does not work here")
    pytest.skip("bubblewrap is not installed or does not work here")


def _kept_by_a_cgroup(bound: str, why: str) -> bool:
    """For tests of a bound a child's control group keeps: a skip that names ``why`` where this
    machine gives no such group, a failure where CI requires groups (KVGRADE_REQUIRE_CGROUPS)."""
    from grader.sandbox import isolation_report
    if isolation_report()[bound] == "cgroup":
        return True
    if os.environ.get("KVGRADE_REQUIRE_CGROUPS"):
        pytest.fail(f"KVGRADE_REQUIRE_CGROUPS is set but {why}")
    pytest.skip(why)


@pytest.fixture
def cgroups():
    return _kept_by_a_cgroup("memory", "no writable memory cgroup on this machine: memory is bounded per process only")


@pytest.fixture
def cgroup_cpu():
    return _kept_by_a_cgroup("cpu_time", "no writable cgroup keeps a child's CPU time here: work is counted from "
                             "/proc alone")
