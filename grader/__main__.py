"""``python -m grader``: the same as ``kvgrade``.

Run from inside a submission folder, Python puts the working directory first on ``sys.path``.
The ``grader`` package is already imported by now (its subpackages resolve through
``grader.__path__``), so drop the working directory before importing anything else: a
candidate's ``click.py`` or ``numpy.py`` must never become the grader's.
"""
import os
import sys

sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != os.getcwd()]

from grader.cli import main  # noqa: E402

main()
