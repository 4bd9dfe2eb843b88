"""Known-wrong decode loops, and which of them explain the steps a submission got wrong.

A decode loop decides two things for the i-th of T new tokens of a step that found P tokens
cached: the position it embeds at, and the cached tokens it attends to. A known mistake is one
wrong rule for either (``MISTAKES``); a step may also carry one wrong position and one wrong
mask at once (``PAIRS``). Each is a ``checking.Variant`` whose case is one decode step.

``replay`` walks a run step by step beside the submission: where its logits match the right
rule, or a wrong one, given what it cached so far, that rule becomes its history, so a step
that is right but inherits an earlier step's wrong keys is not a failure of its own. The
failing steps of every run of a check go to ``checking.explain`` together: a mistake is named
only when it (or it with one other) explains all of them.
"""
from dataclasses import dataclass, field

import numpy as np

from grader.checking import Explanation, Variant, explain, fits

from . import oracle


def tokens(n: int) -> str:
    """'1 token', '5 tokens'."""
    return f"{n} token" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class Rule:
    """One way to do a step: ``position(P, T, i)`` and ``sees(P, T, i)`` for new token i."""
    name: str
    position: object
    sees: object

    def positions(self, P, T):
        return [self.position(P, T, i) for i in range(T)]

    def attends(self, P, T):
        return [self.sees(P, T, i) for i in range(T)]


def _right_position(P, T, i):
    return P + i


def _causal(P, T, i):
    return range(P + i + 1)


def _top_left(P, T, i):
    return range(i + 1)


RIGHT = Rule("right", _right_position, _causal)

POSITION_MISTAKES = [  # (diagnosis id, rule, sentence for a step (P, T))
    ("position_after_append", Rule("one_past", lambda P, T, i: P + 1 + i, _causal),
     lambda P, T: f"with {tokens(P)} cached, the first new token was embedded at position {P + 1}, not "
                  f"{P}: the position was read after the append (len(cache) + 1), so every position is one too far"),
    ("position_after_append", Rule("chunk_past", lambda P, T, i: P + T + i, _causal),
     lambda P, T: f"with {tokens(P)} cached, the {T} new ones were embedded from position {P + T}, not "
                  f"{P}: the positions were read after appending them"),
    ("position_reset", Rule("reset", lambda P, T, i: i, _causal),
     lambda P, T: f"with {tokens(P)} cached, the new ones were embedded from position 0, not {P}: "
                  "every step looks like the start of the sequence"),
]
def _TOP_LEFT_SENTENCE(P, T):  # named as a sentence, like the lambdas beside it
    return (f"with {tokens(P)} cached and {T} new, new token i saw cached tokens 0 .. i only, not 0 .. {P} + i: "
            "the prefill triangle in the top-left corner instead of the bottom-right")



MASK_MISTAKES = [
    ("top_left_chunk_mask", Rule("top_left", _right_position, _top_left), _TOP_LEFT_SENTENCE),
    ("top_left_chunk_mask", Rule("top_left_in_chunks", _right_position,
                                 lambda P, T, i: _causal(P, T, i) if T == 1 else _top_left(P, T, i)),
     _TOP_LEFT_SENTENCE),
    ("no_mask_in_chunk", Rule("no_mask", _right_position, lambda P, T, i: range(P + T)),
     lambda P, T: f"with {tokens(P)} cached and {T} new, each new token also saw the new tokens after "
                  "it: a step of more than one token needs the causal mask"),
]
MISTAKES = POSITION_MISTAKES + MASK_MISTAKES


@dataclass
class Step:
    """One decode_step the submission got wrong: its place in the run, and the logits each rule
    gives there on the submission's own history (empty once that history is unknown)."""
    P: int
    T: int
    right: np.ndarray | None
    outputs: dict = field(default_factory=dict)  # rule name -> logits [T, vocab], or None


def _variant(diagnosis_id, rule, sentence) -> Variant:
    return Variant(diagnosis_id, lambda step: step.outputs.get(rule.name), lambda step: sentence(step.P, step.T))


PAIRS = {  # rule name -> ((id, rule, sentence) of its position mistake, of its mask mistake)
    f"{a[1].name}+{b[1].name}": (a, b) for a in POSITION_MISTAKES for b in MASK_MISTAKES}


def _pair_rule(name) -> Rule:
    (_, position, _), (_, mask, _) = PAIRS[name]
    return Rule(name, position.position, mask.sees)


def _pair_variant(name) -> Variant:
    (a_id, _, say_a), (b_id, _, say_b) = PAIRS[name]
    # the sentence is both mistakes' own, as (id, sentence) pairs: explain_steps names each
    return Variant(f"{a_id} with {b_id}", lambda step: step.outputs.get(name),
                   lambda step: ((a_id, say_a(step.P, step.T)), (b_id, say_b(step.P, step.T))))


VARIANTS = [_variant(*m) for m in MISTAKES] + [_pair_variant(name) for name in PAIRS]


def _try(history: oracle.Tokens, rule: Rule, ids, P, T):
    """(history extended by the step under ``rule``, its logits), or (None, None) if it cannot run."""
    try:
        return history.then(ids, rule.positions(P, T), rule.attends(P, T))
    except IndexError:
        return None, None


def replay(got: np.ndarray, params, n_head, ids, chunks) -> tuple[np.ndarray, list]:
    """(the right logits of the run [len(ids), vocab], the steps the submission got wrong).

    ``got`` holds the submission's logits of every token of the run, in order. A step is wrong
    when it breaks the right rule on the submission's own history; once a step fits no rule that
    history is unknown, and every later step that differs from the truth counts as wrong.
    """
    truth = mine = oracle.Tokens(params, n_head)  # mine: the submission's history, as far as known
    want, wrong, lost = [], [], False
    for P, T in oracle.schedule_steps(chunks):
        new, here, before = ids[P:P + T], got[P:P + T], truth
        truth, right = truth.then(new, RIGHT.positions(P, T), RIGHT.attends(P, T))
        want.append(right)
        if lost:
            if not oracle.close(here, right):
                wrong.append(Step(P, T, None))
            continue
        after, expected = (truth, right) if mine is before else _try(mine, RIGHT, new, P, T)
        if oracle.close(here, expected):
            mine = after
            continue
        step, branches = Step(P, T, expected), {}
        for rules in ([m[1] for m in MISTAKES], [_pair_rule(name) for name in PAIRS]):
            for rule in rules:
                branches[rule.name], step.outputs[rule.name] = _try(mine, rule, new, P, T)
            fitting = [n for n, out in step.outputs.items() if out is not None and oracle.close(here, out)]
            if fitting:
                break  # a single mistake fits: a pair, both of its parts showing, cannot fit too
        wrong.append(step)
        mine, lost = (branches[fitting[0]], False) if fitting else (mine, True)
    return np.concatenate(want), wrong


def _same(a, b, step) -> bool:
    return oracle.close(a, b)


def _right(step):
    return step.right


def explain_steps(failures) -> Explanation:
    """Which known mistakes explain every failing (Step, submitted logits) of a check.

    A pair variant names its two mistakes, each with its own sentence; more than two mistakes
    in all name none.
    """
    found = explain(VARIANTS, failures, right=_right, same=_same)
    named = []
    for variant_id, sentence in found.named:
        named += list(sentence) if isinstance(sentence, tuple) else [(variant_id, sentence)]
    ids = list(dict.fromkeys(i for i, _ in named))
    if len(ids) > 2:
        return Explanation([], "consistent with " + " and ".join(i.replace("_", " ") for i in ids))
    if named:
        return Explanation([next(n for n in named if n[0] == i) for i in ids])
    if found.hint.endswith("in this case"):  # one step fits something: say which, and how many
        return Explanation([], _partial_fit(failures))
    return Explanation([], found.hint)  # several mistakes fit every step alike: "consistent with X or Y"


def _partial_fit(failures) -> str:
    """The first mistake that fits some wrong steps (none fits them all): where, and how many."""
    for variant in VARIANTS:
        fitting = [step for step, got in failures if fits(variant, step, got, _right, _same)]
        if fitting:
            return (f"the step with {tokens(fitting[0].P)} cached and {fitting[0].T} new is consistent with "
                    f"{variant.id.replace('_', ' ')}, which fits only {len(fitting)} of the {len(failures)} wrong "
                    "steps; no known mistake explains them all")
    return ""
