"""Ship the kit's data in the wheel: exercises/, rubrics/ and solutions/ stay at the top of the
repository and are copied into the built package as ``grader/kit/`` (see grader/catalog.py's
KIT_ROOT). Editable installs read them from the checkout instead."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

KIT_FOLDERS = ("exercises", "rubrics", "solutions")


class BuildWithKit(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        root = Path(__file__).resolve().parent
        for name in KIT_FOLDERS:
            shutil.copytree(root / name, Path(self.build_lib) / "grader" / "kit" / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))


setup(cmdclass={"build_py": BuildWithKit})
