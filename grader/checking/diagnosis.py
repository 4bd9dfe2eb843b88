"""Naming classic mistakes: the variants a failing case fits, explained over every failing case
of a check, and recorded on the run."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .run import ExerciseRun, fail


@dataclass(frozen=True)
class Variant:
    """A known-wrong version of one function: ``build(case)`` gives its output on ``case``
    (None where the mistake does not apply, a predicate where it allows many outputs: see
    :func:`fits`), ``sentence(case)`` names it in that case."""

    id: str
    build: Callable[[Any], Any]
    sentence: Callable[[Any], str]


@dataclass
class Explanation:
    named: list  # [(diagnosis id, sentence)]: mistakes that explain every failing case
    hint: str = ""  # "consistent with ... in this case" when one case fits but not all


def _equal(got, wrong, case) -> bool:
    return np.array_equal(got, wrong)


def fits(variant: Variant, case, got, right: Callable | None = None, same: Callable = _equal) -> bool:
    """Does ``got`` on ``case`` look like ``variant``'s answer (and unlike the right one there)?

    A variant whose mistake allows many answers (masking more tiles than needed, in any pattern)
    builds a predicate instead of an answer: ``build(case)(got)`` says whether ``got`` shows it.
    """
    wrong = variant.build(case)
    if callable(wrong):
        return bool(wrong(got)) and not (right and wrong(right(case)))
    return wrong is not None and same(got, wrong, case) and not (right and same(right(case), wrong, case))


def explain(variants: list, failures: list, right: Callable | None = None,
            same: Callable = _equal, passes: list = ()) -> Explanation:
    """Which known mistakes explain ``failures``, a list of (case, submitted output)?

    ``same(got, wrong, case)`` compares (exact by default); a variant equal to ``right(case)``
    fits nothing there. ``passes``, cases the submission got right, refute any variant that
    would have got one of them wrong: a mistake the answer made would have shown there too.
    The naming rule is :func:`explain_fits`'.
    """
    if right is not None:
        variants = [v for v in variants if not any(_wrong_on(v, case, right, same) for case in passes)]
    fitted: dict[str, list] = {}
    for v in variants:
        row = [v.sentence(case) if fits(v, case, got, right, same) else None for case, got in failures]
        merged = fitted.setdefault(v.id, [None] * len(failures))  # two variants of one id: either may fit
        fitted[v.id] = [a if a is not None else b for a, b in zip(merged, row)]
    return explain_fits(fitted)


def _wrong_on(variant: Variant, case, right: Callable, same: Callable) -> bool:
    """Would ``variant`` (an exact one) have answered ``case`` differently from the right answer?"""
    wrong = variant.build(case)
    return wrong is not None and not callable(wrong) and not same(right(case), wrong, case)


def explain_fits(fitted: dict[str, list]) -> Explanation:
    """The one naming rule of the kit. ``fitted`` maps a diagnosis id to, for each failing case in
    order, the sentence naming it there when the mistake fits that case, else None.

    A mistake is named only when it explains EVERY failing case, so the name cannot change with
    the seed's choice of cases; when several do (attention-gym's block mask is both top-left and
    tile-index aligned), each is named. Failing that, two mistakes that together cover every
    case (each fitting some) are both named. Otherwise one fitting case gives only a hint.
    """
    fitted = {i: row for i, row in fitted.items() if any(s is not None for s in row)}
    whole = [(i, next(s for s in row if s is not None)) for i, row in fitted.items()
             if all(s is not None for s in row)]
    if whole:
        return Explanation(whole)
    ids = list(fitted)
    for a, b in ((a, b) for n, a in enumerate(ids) for b in ids[n + 1:]):
        if all(x is not None or y is not None for x, y in zip(fitted[a], fitted[b])):
            return Explanation([(i, next(s for s in fitted[i] if s is not None)) for i in (a, b)])
    for i, row in fitted.items():
        if any(s is not None for s in row):
            return Explanation([], f"consistent with {i.replace('_', ' ')} in this case")
    return Explanation([])


def name_mistakes(ex: ExerciseRun, explanation: Explanation) -> str:
    """Record the named mistakes on ``ex``; the text to append to a failure message. None is named once
    the module has handed back an array the grader had written over (a memo handed out writable): its
    wrong values may be that write, which can look like any mistake."""
    again = getattr(getattr(getattr(ex, "sandbox", None), "ownership", None), "again", None)
    if again and (explanation.named or explanation.hint):
        earlier, later = again[0]
        return (f"; no mistake named: a later {later} handed back the array an earlier {earlier} had returned, "
                "which the grader had since written over (as a caller may), so wrong values here may be that "
                "write (see results_belong_to_the_caller)")
    for diagnosis_id, sentence in explanation.named:
        ex.diagnose(diagnosis_id, sentence)
    parts = [sentence for _, sentence in explanation.named] or ([explanation.hint] if explanation.hint else [])
    return "".join(f"; {p}" for p in parts)


@dataclass
class Miss:
    """One failing case: its size (to pick the smallest), what to say, and the mistakes that fit it
    as (diagnosis id, sentence) pairs."""
    size: int
    message: str
    case: dict
    kind: str = "wrong"
    found: list = field(default_factory=list)


def settle(ex, misses: list):
    """Fail with the smallest miss (``None`` entries are cases that passed), naming mistakes by
    :func:`explain_fits` over every miss of the check (each miss lists the mistakes that fit it)."""
    misses = sorted((m for m in misses if m is not None), key=lambda m: m.size)
    if not misses:
        return
    fitted: dict[str, list] = {}
    for n, miss in enumerate(misses):
        for diagnosis_id, sentence in miss.found:
            fitted.setdefault(diagnosis_id, [None] * len(misses))[n] = sentence
    smallest = misses[0]
    fail(smallest.message + name_mistakes(ex, explain_fits(fitted)), case=smallest.case, kind=smallest.kind)
