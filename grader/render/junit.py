"""JUnit XML for CI: one testsuite per exercise, one testcase per hidden check.

A failed check is a ``<failure>``; an exercise the grader could not run is one ``<error>``
testcase; an exercise not attempted is one ``<skipped>`` testcase. Counts on every suite and
on the root are the sums of what they hold.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from ..result import ExerciseResult, Result
from . import interview
from .common import caveats, exercise_level, failure_lines, levels_shown, replay, what_happened


def render(result: Result) -> str:
    root = ET.Element("testsuites", name="kvgrade")
    for e in result.exercises:
        root.append(_suite(result, e))
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(s.get(key)) for s in root)))
    root.set("time", f"{sum(float(s.get('time')) for s in root):.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(result: Result, e: ExerciseResult) -> ET.Element:
    suite = ET.Element("testsuite", name=e.id)
    props = ET.SubElement(suite, "properties")
    level = [("level", exercise_level(e))] if levels_shown(result) else []
    for name, value in (*(("caveat", line) for line in caveats(result)), *level, ("status", e.status),
                        ("seed", str(result.seed)), *(("replay", line) for line in [replay(result, e)] if line),
                        *((f"diagnosis.{d.id}", d.message) for d in e.diagnoses),
                        *(("interview", line) for line in interview.hint_lines(e)
                          + interview.timeline_lines(e))):
        ET.SubElement(props, "property", name=name, value=value)
    classname = f"kvgrade.{e.id}"
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if e.status == "not_attempted":
        case = ET.SubElement(suite, "testcase", classname=classname, name="attempted", time="0")
        ET.SubElement(case, "skipped", message=f"not attempted: {e.error or 'no module found'}")
        counts.update(tests=1, skipped=1)
    elif e.status == "error":
        case = ET.SubElement(suite, "testcase", classname=classname, name="loads", time="0")
        ET.SubElement(case, "error", message=e.error or "error", type="GradingError").text = e.error or ""
        counts.update(tests=1, errors=1)
    for c in e.checks:
        case = ET.SubElement(suite, "testcase", classname=classname, name=c.id, time=f"{c.seconds:.3f}")
        counts["tests"] += 1
        if not c.passed:
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=what_happened(c) or c.description, type="CheckFailed")
            failure.text = "\n".join(failure_lines(result, e.id, c))
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{sum(c.seconds for c in e.checks):.3f}")
    return suite
