"""Random operation sequences against a logical model, shrunk to a short failing one.

CONTRACT section 1 says a cache gives the right observables after any sequence of calls. So a
stateful exercise (paged_kv_cache, ring_buffer_window, gpt2_decode, rope_cache, prefix_cache) is
checked the way Hypothesis's ``RuleBasedStateMachine`` checks a system: draw random sequences of
operations, apply each to the candidate's object and to the oracle's model, compare every
observable after every operation (outputs, tables, counts, lengths, exceptions, and nothing
changed after an error), then shrink the first failing sequence to a short one that still fails.

Each exercise supplies two things:
- ``play(ops)``: build a fresh candidate object and a fresh model, apply ``ops`` in order, and
  return the first failure (any object, e.g. ``checking.Miss``) or None. It must be a pure
  function of ``ops``: every value an operation needs (K/V data, tokens) is drawn from a seed
  the operation carries, so a shrunk sequence replays exactly.
- the sequences, drawn from the grading seed by generators that know the exercise (a small
  pool of shared prefixes, sizes at the boundaries, the pool running out), since uniform draws
  rarely reach the states where caches go wrong.

Shrinking is bounded by a fixed number of replays, never by time, so the same seed gives the
same case on an idle machine and on a busy one; each replay runs in the candidate's own time
budget. The case a report shows is the shrunk sequence, short but not always the shortest, and
``--check`` reruns the same draws and so reaches the same sequence.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

SHRINK_REPLAYS = 48  # replays a shrink may spend: enough to cut a 40-step sequence to a handful


@dataclass(frozen=True)
class Op:
    """One operation: the method it calls and its arguments, as a report shows them."""
    name: str
    args: tuple = ()
    shown: str | None = None  # how a report writes the arguments, where the values are not the point

    def __str__(self) -> str:
        return f"{self.name}({self.shown if self.shown is not None else ', '.join(map(repr, self.args))})"


def describe_ops(ops: list, limit: int = 14) -> str:
    """The sequence as one line for a case: every operation, or the first few and the last ones."""
    shown = [str(op) for op in ops]
    if len(shown) > limit:
        shown = shown[:2] + [f"... {len(shown) - limit + 1} more"] + shown[-(limit - 3):]
    return "; ".join(shown)


def first_failure(sequences: Iterable[list], play: Callable[[list], object],
                  replays: int = SHRINK_REPLAYS) -> tuple[list, object] | None:
    """(shrunk operations, their failure) for the first sequence that fails, or None."""
    for ops in sequences:
        failure = play(ops)
        if failure is not None:
            return shrink(list(ops), failure, play, replays)
    return None


def shrink(ops: list, failure, play, replays: int = SHRINK_REPLAYS) -> tuple[list, object]:
    """Delta debugging: drop ever smaller runs of operations while the rest still fails.

    Any failure counts, not only the first one's kind: a shorter sequence that fails otherwise
    is still a wrong answer on a valid sequence (the model defines every operation, invalid ones
    included, so any subsequence is a valid test).
    """
    parts = 2
    while len(ops) > 1 and replays > 0:
        size = -(-len(ops) // parts)
        for start in range(0, len(ops), size):
            trial = ops[:start] + ops[start + size:]
            replays -= 1
            found = play(trial)
            if found is not None:
                ops, failure, parts = trial, found, max(parts - 1, 2)
                break
            if replays <= 0:
                break
        else:
            if size == 1:
                break
            parts = min(len(ops), parts * 2)
    return ops, failure
