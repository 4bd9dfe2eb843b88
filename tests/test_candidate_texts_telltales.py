"""Every text a candidate can see states the behaviour, never the rule being tested.

test_prompts.py covers the prompt, the stub and the public tests. A candidate also reads each
hidden check's description (`kvgrade show ID --checks`, summary feedback, the live room's
candidate page): those lines face the same telltales, and the same worded hints of the rule
("P + depth", "ancestors and self", exact counts of masked entries).
"""
import re

import pytest

from grader import catalog
from grader.render.common import for_candidate
from grader.result import Diagnosis
from grader.rubric import WORDED_RULES as WORDED

from .render_helpers import saved_result
from .test_prompts import _normalised


@pytest.mark.parametrize("exercise", catalog.exercises(), ids=lambda e: e.id)
def test_no_check_description_states_the_rule(exercise):
    found = []
    for check, line in exercise.checks.items():
        text = _normalised(line).lower()
        found += [(check, t) for t in exercise.rubric.telltales if _normalised(t).lower() in text]
        found += [(check, w) for w in WORDED if re.search(w, line, re.IGNORECASE)]
    assert not found, f"{exercise.id}: check descriptions state the rule: {found}"


def test_the_worded_hints_are_caught_where_they_were_seen():
    """The descriptions the newcomer review quoted are each caught by this net."""
    quoted = ["Token positions are P + depth for every draft.", "Each draft sees the cache, ancestors and self.",
              "A 128 x 128 prefill has exactly 6 of 16,384 entries masked."]
    assert all(any(re.search(w, q, re.IGNORECASE) for w in WORDED) for q in quoted)


@pytest.mark.parametrize("exercise", catalog.exercises(), ids=lambda e: e.id)
def test_no_title_states_the_rule(exercise):
    """A title is on every list, report and the live room's header: "Bottom-right causal mask" gave decode_mask's
    answer away (a newcomer pass)."""
    text = _normalised(exercise.title).lower()
    found = [t for t in exercise.rubric.telltales if _normalised(t).lower() in text]
    found += [w for w in WORDED if re.search(w, exercise.title, re.IGNORECASE)]
    assert not found, f"{exercise.id}: its title states the rule: {found}"


@pytest.mark.parametrize("exercise", catalog.exercises(), ids=lambda e: e.id)
def test_the_candidates_copy_names_each_mistake_without_stating_the_rule(exercise):
    """A newcomer pass: summary feedback (Gradescope, --feedback summary) showed each diagnosis's explanation,
    "each side must first be multiplied by exp(m_side - max(m_a, m_b))", to a student who may submit again.
    The candidate's copy keeps an explanation only where it states no telltale or worded rule."""
    result = saved_result()
    graded = result.exercises[0]
    graded.id = exercise.id
    graded.diagnoses = [Diagnosis(d.id, "the concrete sentence with hidden inputs", d.caps, d.explain)
                        for d in exercise.rubric.diagnoses]
    shown = for_candidate(result).exercises[0].diagnoses
    assert [d.id for d in shown] == [d.id for d in exercise.rubric.diagnoses]
    for rule, d in zip(exercise.rubric.diagnoses, shown):
        assert "hidden inputs" not in d.message
        said = d.message.replace(d.id.replace("_", " "), "")  # the mistake's name is shown in every copy
        text = _normalised(said).lower()
        assert not [t for t in exercise.rubric.telltales if _normalised(t).lower() in text], (d.id, d.message)
        assert not [w for w in WORDED if re.search(w, said, re.I)], d.message
        assert d.message == rule.explain or d.message.startswith(d.id.replace("_", " "))


def test_an_explanation_that_states_no_rule_is_kept_for_the_candidate():
    """The filter is no blanket: most explanations teach without giving the rule away, and stay."""
    kept = total = 0
    for exercise in catalog.exercises():
        for d in exercise.rubric.diagnoses:
            total += 1
            kept += bool(d.explain) and not exercise.rubric.states_rule(d.explain)
    assert kept > total / 2, (kept, total)
    assert catalog.get("nan_safe_softmax").rubric.states_rule("each side times exp(m_side - max(m_a, m_b))")
