"""Shared by the renderer tests: a fixed saved result to render, and golden-file comparison."""
import json
import os
from pathlib import Path

from grader.result import Result

GOLDEN = Path(__file__).parent / "golden"


def saved_result() -> Result:
    """A top-left submission graded at seed 0, plus one exercise not attempted and one in error."""
    return Result.from_dict(json.loads((GOLDEN / "report_input.json").read_text()))


def assert_golden(text: str, name: str):
    """Compare with tests/golden/<name>; KVGRADE_UPDATE_GOLDEN=1 rewrites it (review the diff)."""
    path = GOLDEN / name
    if os.environ.get("KVGRADE_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} changed; rerun with KVGRADE_UPDATE_GOLDEN=1 and review the diff"
