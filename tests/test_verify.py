"""The kit's central promise: rubrics follow the calibration, and hidden tests separate every
reference from every known mistake. One verify run over the whole kit, in one process pool,
shared by every parametrized test (``kit_outcomes``, in conftest.py)."""
import pytest

from grader import catalog


@pytest.mark.slow
@pytest.mark.parametrize("exercise_id", [e.id for e in catalog.exercises()])
def test_rubric_holds_references_reach_strong_hire_and_every_mutant_is_caught(kit_outcomes, exercise_id):
    mine = [o for o in kit_outcomes if o.exercise == exercise_id]
    assert [o.subject for o in mine[:2]] == ["rubric", "reference"]
    assert "(provisional)" in mine[1].line, "no notes: a reference's strong_hire waits on observations"
    assert len(mine) >= 4, "an exercise needs known-wrong solutions to prove its checks"
    failures = [f"{o.subject}: {o.line}" for o in mine if not o.ok]
    assert not failures, failures
