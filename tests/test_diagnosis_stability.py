"""Diagnoses follow the mistake, not the seed: every mutant draws the same names across seeds.

What guarantees it is the mechanism (a mistake is named only when it explains every failing
case of a check), so this runs the real checks on the real mutants, in the real sandbox. It
builds on the suite's one verify run (``kit_outcomes``, at ``verify_seed``), which says which
checks each mutant fails and what they named there: for each file mutant one sandbox reruns
exactly those checks at other seeds, and what they name is compared with the verify run's
names. Mutants are spread over a process pool, which runs in the background beside the rest of
the suite (``background.py``).

Seeds are SAMPLED to fit the suite's CI budget: SAMPLED_SEEDS other seeds per mutant, drawn from
0-20 by the mutant's name, so different mutants try different seeds and the sample is the same
on every run. KVGRADE_STABILITY_SEEDS=all reruns every mutant on all the other seeds of 0-20 (the
full sweep, several times slower).
"""
import multiprocessing
import os
import tempfile
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from grader import catalog, engine, own_tests
from grader.plugin import GENERAL_IDS
from grader.sandbox import Limits
from grader.verify import mutant_submission

from . import background

ALL_SEEDS = range(21)
SAMPLED_SEEDS = 1  # other than the verify seed, per mutant: the file mutants still try every other seed
LIMITS = Limits(exercise_seconds=3600.0, cpu_seconds=3600)  # 21 seeds share one child's time budget


def seeds_for(mutant_name: str, verify_seed: int) -> list[int]:
    """The seeds other than the verify seed at which the mutant's failing checks are rerun."""
    others = [s for s in ALL_SEEDS if s != verify_seed]
    if os.environ.get("KVGRADE_STABILITY_SEEDS") == "all":
        return others
    rng = np.random.default_rng(zlib.crc32(mutant_name.encode()))
    return sorted(int(s) for s in rng.choice(others, SAMPLED_SEEDS, replace=False))


def _seeded(failing: tuple[str, ...]) -> list[str]:
    """The failing checks that draw from the seed and may name a mistake: not the candidate's own
    tests (no seed in them), not the general rules (they name no mistake, and replay the calls the
    exercise's checks made; rerun alone in a sandbox that served another seed, their valid calls
    would warm a memo that the next seed's rejection checks then meet)."""
    return [c for c in failing if not c.startswith(own_tests.CHECK_PREFIX) and c not in GENERAL_IDS]


def _names_by_seed(exercise_id: str, mutant_name: str, checks: list[str], seeds: list[int]) -> dict:
    """{seed: sorted diagnosis ids} that ``checks`` draw at each seed, in one sandbox of the mutant."""
    ex = catalog.get(exercise_id)
    mutant = next(m for m in ex.mutants if m.name == mutant_name)
    with tempfile.TemporaryDirectory(prefix="kvgrade-stability-") as tmp:
        submission = mutant_submission(mutant, Path(tmp))
        modules = {e.id: engine.locate(submission, e.id) for e in catalog.exercises()}
        run = engine._prepare(ex, modules[ex.id], modules, 0, LIMITS, submission)
        engine._start_all({ex.id: run})
        try:
            drawn = {}
            for seed in seeds:
                run.seed, run.diagnoses = seed, {}
                if checks:
                    engine._run_checks({ex.id: run}, set(checks), None, own_tests_stage=False)
                drawn[seed] = sorted(run.diagnoses)
            return drawn
        finally:
            run.sandbox.close()


@background.job("names_by_seed")
def _draw_names_by_seed(earlier):
    """{exercise: {mutant: {seed: sorted diagnosis ids}}} for every file mutant."""
    verify_seed = background.VERIFY_SEED
    file_mutants = {(m.exercise, m.name) for ex in catalog.exercises() for m in ex.mutants if m.path.is_file()}
    graded = [o for o in earlier["kit_outcomes"] if (o.exercise, o.subject) in file_mutants]
    assert {(o.exercise, o.subject) for o in graded} == file_mutants, "the verify run graded every file mutant"
    jobs = [(o.exercise, o.subject, _seeded(o.failing), seeds_for(o.subject, verify_seed)) for o in graded]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=context) as pool:
        drawn = pool.map(_names_by_seed, *zip(*jobs))
        found: dict = {}
        for o, by_seed in zip(graded, drawn):
            found.setdefault(o.exercise, {})[o.subject] = {verify_seed: list(o.diagnoses), **by_seed}
    return found


@pytest.fixture(scope="module")
def names_by_seed():
    """The job's result (started in the background when the session began, after the verify run)."""
    return background.result("names_by_seed")


@pytest.mark.slow
@pytest.mark.parametrize("exercise_id", [e.id for e in catalog.exercises()])
def test_every_mutant_draws_the_same_diagnoses_for_every_seed(names_by_seed, verify_seed, exercise_id):
    ex = catalog.get(exercise_id)
    unstable = {name: by_seed for name, by_seed in names_by_seed[exercise_id].items()
                if len({tuple(ids) for ids in by_seed.values()}) > 1}
    assert not unstable, {name: {s: ids for s, ids in by_seed.items()} for name, by_seed in unstable.items()}
    for mutant in (m for m in ex.mutants if m.path.is_file()):
        drawn = set(names_by_seed[exercise_id][mutant.name][verify_seed])
        expected = set(mutant.expected_diagnoses)
        assert expected <= drawn if expected else not drawn, (mutant.name, sorted(drawn))
