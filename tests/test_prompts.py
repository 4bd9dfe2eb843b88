"""Prompts, stubs and public tests state the behaviour, never the rule being tested.

Each rubric's ``telltales`` are expressions of its rule; none may appear (whitespace
normalised, case ignored) in what a candidate sees. A blacklist is a net, not a proof: a
reviewer still reads each prompt.
"""
import re

import pytest

from grader import catalog
from grader.workspace import exercise_files

# Every exercise the kit has a rubric or hidden checks for, read from the tree, not typed: the
# catalog (which discovers exercises from exercises/) must find each one.
ALWAYS_THERE = ({p.stem for p in (catalog.KIT_ROOT / "rubrics").glob("*.toml")}
                | {p.parent.name for p in catalog.HIDDEN_ROOT.glob("*/checks.py")})


def _normalised(text: str) -> str:
    """Whitespace runs as one space, none around operators: "S-T" and "S  - T" read the same."""
    return re.sub(r" ?([^\w ]) ?", r"\1", re.sub(r"\s+", " ", text))


@pytest.mark.parametrize("exercise", catalog.exercises(), ids=lambda e: e.id)
def test_every_rubric_names_telltales_hints_and_a_time_box(exercise):
    rubric = exercise.rubric
    assert rubric.telltales, f"{exercise.id}: no telltales"
    assert 3 <= len(rubric.hints) <= 4, f"{exercise.id}: {len(rubric.hints)} hints"
    assert rubric.time_box_minutes and rubric.checkpoints
    assert all(a.minutes < b.minutes for a, b in zip(rubric.checkpoints, rubric.checkpoints[1:]))


@pytest.mark.parametrize("exercise", catalog.exercises(), ids=lambda e: e.id)
def test_no_prompt_stub_or_public_test_states_the_rule(exercise):
    seen = {path.name: _normalised(path.read_text()) for path in exercise_files(exercise)
            if path not in exercise.helper_files}  # helpers (the GPT-2 model) are kit code, not the prompt
    found = [(name, t) for t in exercise.rubric.telltales for name, text in seen.items() if _normalised(t) in text]
    assert not found, f"{exercise.id}: telltales in what a candidate sees: {found}"


def test_the_kit_exercises_are_all_checked():
    assert ALWAYS_THERE <= {e.id for e in catalog.exercises()}


@pytest.mark.parametrize("exercise", catalog.exercises(), ids=lambda e: e.id)
def test_a_prompt_that_names_the_precision_rule_states_the_kits_constant(exercise):
    """Blind testers read only the prompts and the contract, which leaves the constant to the kit: a prompt that
    names the rule gives the number the checks use."""
    from grader.checking import PRECISION

    text = _normalised(exercise.prompt_path.read_text())
    if "precision rule" in text:
        stated = (f"{PRECISION}*eps", f"{PRECISION} float64 ulps", f"{PRECISION} ulps")
        assert any(s in text for s in stated), exercise.id
