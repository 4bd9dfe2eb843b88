"""Shared helpers for the kit's own tests."""
import shutil
from pathlib import Path

import pytest

from grader import catalog

EXAMPLES = Path(__file__).parent / "examples"


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
