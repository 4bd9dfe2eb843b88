"""Every text a candidate can see states the behaviour, never the rule being tested.

test_prompts.py covers the prompt, the stub and the public tests. A candidate also reads each
hidden check's description (`kvgrade show ID --checks`, summary feedback, the live room's
candidate page): those lines face the same telltales, and the same worded hints of the rule
("P + depth", "ancestors and self", exact counts of masked entries).
"""
import re

import pytest

from grader import catalog

from .test_prompts import _normalised

# Worded forms of the rules that rubric telltales (written as code) do not catch.
WORDED = [r"\bP\s*\+\s*depth\b", r"ancestors,? and (it)?self", r"cache, (its )?ancestors", r"exactly [\d,]+ of [\d,]+",
          r"\bS\s*-\s*T\s*\+\s*i\b", r"bottom[- ]right", r"len\(cache\)\s*\+", r"top[- ]left", r"bottom rows",
          r"every tile is FULL"]


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
