"""Running a candidate's own tests (``test_<id>.py``) against a given implementation.

The tests are candidate code, so they run in a child under the same limits as the module,
in a scratch folder holding the candidate's files with the implementation under test copied
in as ``<id>.py``. The outcome comes from pytest's exit status and its JUnit XML, both
structured; nothing is read from printed text.
"""
from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .sandbox.launch import Limits, Scratch, kill, spawn

TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class OwnTestsRun:
    outcome: str  # "passed" | "failed" | "no_tests" | "error"
    tests: int = 0
    failures: int = 0
    detail: str = ""

    @property
    def line(self) -> str:
        counts = f"{self.tests} test(s), {self.failures} failing"
        return {"passed": f"all pass ({counts})", "failed": f"some fail ({counts})",
                "no_tests": "no tests were collected"}.get(self.outcome, f"could not run: {self.detail}")


def run(test_file: Path, implementation: Path, module_name: str, helper_files, limits: Limits,
        timeout: float = TIMEOUT_SECONDS) -> OwnTestsRun:
    scratch = Scratch(prefix="kvgrade-tests-")
    try:
        siblings = [(p.name, p) for p in sorted(test_file.parent.glob("*.py"))
                    if p.name != f"{module_name}.py" and p.stat().st_size <= 1 << 20]
        scratch.add_files("work", list(helper_files) + siblings + [(f"{module_name}.py", implementation)])
        (scratch.work / "pytest.ini").write_text("[pytest]\n")
        junit = scratch.root / "junit.xml"
        proc = spawn(["-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                      test_file.name], scratch, limits)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill(proc)
            return OwnTestsRun("error", detail=f"the tests did not finish within {timeout:g} s")
        finally:
            kill(proc)
        tests, failures = _junit_counts(junit)
        if code == 0:
            return OwnTestsRun("passed", tests, failures)
        if code == 1:
            return OwnTestsRun("failed", tests, failures)
        if code == 5:
            return OwnTestsRun("no_tests")
        tail = scratch.output_tail(300).splitlines()
        return OwnTestsRun("error", tests, failures,
                           f"pytest exited with status {code}" + (f": {tail[-1][:200]}" if tail else ""))
    finally:
        scratch.remove()


def _junit_counts(path: Path) -> tuple[int, int]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return 0, 0
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    tests = sum(int(s.get("tests", 0)) for s in suites)
    failures = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    return tests, failures
