"""Copied into every child's runtime folder as ``sitecustomize.py`` (Python imports it at start):
seeds Python's ``random`` and numpy's global generator from the seed the grader gives it (the same
for every grading seed: ``policy.CHILD_SEED``), and makes
``numpy.random.default_rng()`` without a seed draw its n-th generator from (that seed, n),
so a run that draws from any of them replays exactly, whatever the candidate's code or tests do."""
import itertools
import os
import random

_SEED = int(os.environ.get("KVGRADE_SEED", "0") or 0)
random.seed(_SEED)
try:
    import numpy
except ImportError:  # a child that never needs numpy
    pass
else:
    numpy.random.seed(_SEED % 2**32)
    _unseeded = itertools.count()
    _default_rng = numpy.random.default_rng

    def default_rng(seed=None):
        """numpy's ``default_rng``; without a seed, the next generator of the child's seed."""
        if seed is None:
            seed = numpy.random.SeedSequence([_SEED, next(_unseeded)])
        return _default_rng(seed)

    default_rng.__doc__ = _default_rng.__doc__
    numpy.random.default_rng = default_rng
