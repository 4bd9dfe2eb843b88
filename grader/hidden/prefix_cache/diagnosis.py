"""Which known mistakes explain a failing operation sequence.

A mistake is a switch on the oracle's model (``oracle.MISTAKES``); a section 5 id may be made
in more than one way (eviction_order: blocks reused most recently freed first, or a sequence
freed head first). A failing case is the candidate's trace over a sequence: every operation's
outcome and the observables after it, up to and including the first operation where it differs
from the right model. A mistake fits a case when the model with that switch on gives the same
trace, so it reproduces everything the candidate did right and the first thing it did wrong.
It is named only when it fits every failing case of the check (``checking.explain``); when no
single mistake does, two mistakes at once (both switches on) are tried the same way.
"""
from __future__ import annotations

from itertools import combinations

from grader.checking import Explanation, Variant, explain

from . import oracle

SENTENCES = {
    "unchained_hash": "a block is found by its own tokens, whatever came before it: the chain of parent hashes is "
                      "missing, so a block is served after a different prefix",
    "partial_block_cached": "a partly filled block is registered (or served) as if it were full",
    "last_token_served": "a prompt whose every block is cached is served whole, leaving no token to compute its "
                         "logits from: the prompt's last token must never be served",
    "held_block_evicted": "a block that a sequence still holds is handed out again",
    "stale_registration": "a block keeps its registration after it is taken for other tokens, so a later prompt "
                          "hits a block that holds something else",
    "eviction_order": "blocks are evicted in the wrong order: the queue must hand out the least recently freed "
                      "block first, and free must return a sequence's last block first",
}

WAYS = {  # section 5 id -> the model switches that make it, in the order they are tried
    "unchained_hash": ["unchained_hash", "parent_from_registration"],
    "partial_block_cached": ["partial_block_cached"],
    "last_token_served": ["last_token_served"],
    "held_block_evicted": ["held_block_evicted", "held_block_returned"],
    "stale_registration": ["stale_registration", "stale_on_append"],
    "eviction_order": ["lifo_eviction", "head_first_free"],
}

HOW = {"parent_from_registration": " (append_token takes the parent from the previous block's registration, which a "
                                   "block repeating a registered hash does not have)",
       "held_block_evicted": " (a hit block left waiting in the free queue)",
       "held_block_returned": " (free returns blocks that other sequences still hold)",
       "stale_on_append": " (when append_token takes it)",
       "lifo_eviction": " (the most recently freed block is taken first)",
       "head_first_free": " (a sequence's first block is freed first)"}


def replay(sizes, ops, mistakes=frozenset()) -> list:
    """The model's trace over ``ops``: (outcome, observables) after each, as the checks record it."""
    model, trace = oracle.Model(*sizes, mistakes=mistakes), []
    for op in ops:
        outcome = model.apply(op)
        trace.append((outcome, model.observe(watched(model, op))))
    return trace


def watched(model, op) -> list:
    """The sequence ids observed after ``op``: the model's live ones and the one ``op`` names."""
    ids = set(model.seqs)
    if op.args and oracle.is_int(op.args[0]):
        ids.add(int(op.args[0]))
    return sorted(ids)


def _variant(diagnosis_id: str, switches: tuple) -> Variant:
    def build(case):
        sizes, ops = case
        try:
            return replay(sizes, ops, frozenset(switches))
        except (ValueError, IndexError, KeyError):  # a state the mistake cannot go on from: it fits nothing
            return None

    return Variant(diagnosis_id, build, lambda case: "; ".join(SENTENCES[d] for d in diagnosis_id.split("+"))
                   + HOW.get(switches[0], "") * (len(switches) == 1))


VARIANTS = [_variant(d, (s,)) for d, switches in WAYS.items() for s in switches]
PAIRS = [_variant(f"{a}+{b}", (s, t)) for (a, s), (b, t) in
         combinations([(d, s) for d, switches in WAYS.items() for s in switches], 2) if a != b]


def _same(got, wrong, case) -> bool:
    return got == wrong


def explain_sequences(cases: list, passes=()) -> Explanation:
    """The mistakes that explain every failing case, a list of ((sizes, ops), candidate's trace),
    and that no passing sequence (sizes, ops) rules out: there the candidate did what the right
    model does, so a mistake that would have done otherwise is not the one it makes."""
    single = explain(VARIANTS, cases, same=_same)
    ruled = _ruled_out(single, passes)
    if ruled:
        single = explain([v for v in VARIANTS if v.id not in ruled], cases, same=_same)
    if single.named:
        return single
    both = explain(PAIRS, cases, same=_same)
    if len(both.named) == 1 and not _ruled_out(both, passes):
        return Explanation([(d, SENTENCES[d]) for d in both.named[0][0].split("+")])
    return single


def _ruled_out(explanation: Explanation, passes) -> set:
    """The named ids (single, or "a+b") each of whose ways changes the trace of a passing sequence."""
    def changes(switches):
        return any(replay(sizes, ops, frozenset(switches)) != replay(sizes, ops) for sizes, ops in passes)

    def ways(named):
        parts = [WAYS[d] for d in named.split("+")]
        return [(s,) for s in parts[0]] if len(parts) == 1 else [(s, t) for s in parts[0] for t in parts[1]]

    return {named for named, _ in explanation.named if all(changes(w) for w in ways(named))}
