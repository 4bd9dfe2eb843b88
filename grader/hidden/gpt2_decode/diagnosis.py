"""Known-wrong decode loops, and the sentence that names the one a submission matches.

A variant says, for the i-th of T new tokens of a step that found P tokens cached, which
position it embeds at and which cached tokens it attends to. Run over the same schedule of
steps with the oracle, it gives the logits that mistake produces.
"""
import numpy as np

from . import oracle


def tokens(n: int) -> str:
    """'1 token', '5 tokens'."""
    return f"{n} token" + ("" if n == 1 else "s")


def _right_position(P, T, i):
    return P + i


def _causal(P, T, i):
    return range(P + i + 1)


def _top_left(P, T, i):
    return range(i + 1)


VARIANTS = [  # (diagnosis id, position of token i, tokens it sees, sentence for a step (P, T))
    ("position_after_append", lambda P, T, i: P + 1 + i, _causal,
     lambda P, T: f"with {tokens(P)} cached, the first new token was embedded at position {P + 1}, not "
                  f"{P}: the position was read after the append (len(cache) + 1), so every position is one too far"),
    ("position_after_append", lambda P, T, i: P + T + i, _causal,
     lambda P, T: f"with {tokens(P)} cached, the {T} new ones were embedded from position {P + T}, not "
                  f"{P}: the positions were read after appending them"),
    ("position_reset", lambda P, T, i: i, _causal,
     lambda P, T: f"with {tokens(P)} cached, the new ones were embedded from position 0, not {P}: "
                  "every step looks like the start of the sequence"),
    ("top_left_chunk_mask", _right_position, _top_left,
     lambda P, T: f"with {tokens(P)} cached and {T} new, new token i saw cached tokens 0 .. i only, not "
                  f"0 .. {P} + i: the prefill triangle in the top-left corner instead of the bottom-right"),
    ("top_left_chunk_mask", _right_position, lambda P, T, i: _causal(P, T, i) if T == 1 else _top_left(P, T, i),
     lambda P, T: f"with {tokens(P)} cached and {T} new, new token i saw cached tokens 0 .. i only, not "
                  f"0 .. {P} + i: the prefill triangle in the top-left corner instead of the bottom-right"),
    ("no_mask_in_chunk", _right_position, lambda P, T, i: range(P + T),
     lambda P, T: f"with {tokens(P)} cached and {T} new, each new token also saw the new tokens after "
                  "it: a step of more than one token needs the causal mask"),
]


def variant_logits(params, n_head, ids, chunks, position, sees):
    """Logits of the whole run under a variant, or None if it cannot run (no such position)."""
    positions, attends = [], []
    for P, T in oracle.schedule_steps(chunks):
        positions += [position(P, T, i) for i in range(T)]
        attends += [sees(P, T, i) for i in range(T)]
    try:
        return oracle.logits(params, n_head, ids, positions, attends)
    except IndexError:
        return None


def diagnose(got: np.ndarray, params, n_head, ids, chunks):
    """(diagnosis id, sentence) for the known mistake the run's logits ``got`` equal, or None.

    ``got`` holds the logits of every token of the run, in order ([len(ids), vocab]).
    """
    first = _first_step_where_wrong(got, params, n_head, ids, chunks)
    for diagnosis_id, position, sees, sentence in VARIANTS:
        wrong = variant_logits(params, n_head, ids, chunks, position, sees)
        if wrong is not None and oracle.close(got, wrong):
            return diagnosis_id, sentence(*first)
    return None


def _first_step_where_wrong(got, params, n_head, ids, chunks):
    want = oracle.logits(params, n_head, ids)
    for P, T in oracle.schedule_steps(chunks):
        if not oracle.close(got[P:P + T], want[P:P + T]):
            return P, T
    return 0, len(ids)
