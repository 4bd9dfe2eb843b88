"""``python -m grader``: the same as ``kvgrade``.

Run from inside a submission folder, Python puts the working directory first on ``sys.path``.
The ``grader`` package is already imported by now (its subpackages resolve through
``grader.__path__``), so drop the working directory before importing anything else: a
candidate's ``click.py`` or ``numpy.py`` must never become the grader's.
"""
import os
import sys

sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != os.getcwd()]
# Worker processes (verify, batch) are spawned and import grader by name: where it is not
# installed, they find it from its own folder, put last so nothing there shadows a library.
_HOME = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["grader"].__file__)))
if _HOME not in sys.path:
    sys.path.append(_HOME)

from grader.cli import main  # noqa: E402

main()
