"""The kit's central promise: hidden tests separate every reference from every known mistake."""
import pytest

from grader import catalog
from grader.verify import verify


@pytest.mark.slow
@pytest.mark.parametrize("exercise_id", [e.id for e in catalog.exercises()])
def test_references_reach_strong_hire_and_every_mutant_is_caught(exercise_id):
    outcomes = list(verify([exercise_id], seed=7))
    assert outcomes[0].subject == "reference"
    assert len(outcomes) >= 3, "an exercise needs known-wrong solutions to prove its checks"
    failures = [f"{o.subject}: {o.line}" for o in outcomes if not o.ok]
    assert not failures, failures
