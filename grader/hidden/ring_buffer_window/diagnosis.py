"""Known-wrong ways to build the window mask and the step, and the sentences that name them.

A wrong answer is modelled as a set of mistakes (``Mistakes``), each one atom of a classic
bug. ``mask_variants`` and ``step_variants`` list every ``Combination`` of at most two atoms,
the fewest first. A check judges all its failing cases (masks, or streams) together: a
combination survives only if its output equals the submission's in every one of them, and
its mistakes are named only when the fewest-atom survivors agree on them.

Why not ``checking.Variant`` (one id per known-wrong version): here two mistakes can coexist
in ONE mask or one step (slot indices with a window off by one), and the output of the pair
is neither mistake's alone, so a variant must be a combination of atoms naming all its ids.
A combination whose second atom has no effect in some case equals its first atom's output
there, so "this mistake together with one other explains every case" is the survival of one
combination across all cases. Every combination keeps a correct ring (append is checked on
its own), so one ring serves them all while a stream is replayed.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from grader import checking

from . import oracle


@dataclass(frozen=True)
class Mistakes:
    key_index: bool = False  # keys placed at their index in the key array, not their stored position
    ring_slots: str = ""  # "all" / "written": the ring's keys (every slot / written slots only) placed at
    #                      their slot index, while the chunk's own keys keep their positions
    query_slot: bool = False  # ring slots compared with the query's slot p % capacity (after append)
    query_index: bool = False  # query rows taken as positions 0..T-1
    window_delta: int = 0  # the window admits W + delta keys
    no_lower_bound: bool = False  # causal only: the window's lower bound is missing
    empty_visible: bool = False  # slots holding -1 are not excluded
    append_first: bool = False  # the chunk is appended before its queries attend
    late_queries: bool = False  # query positions counted from len(cache) after the append
    window_is_capacity: bool = False  # the window is the ring's capacity (Mistral's rotating buffer)


# Atoms: (name, the fields it sets, the diagnosis ids it shows). Order = preference on ties.
ATOMS = [
    ("key_index", {"key_index": True}, ["slot_index_positions"]),
    ("query_slot", {"key_index": True, "query_slot": True, "append_first": True}, ["slot_index_positions"]),
    ("ring_slots", {"ring_slots": "all"}, ["slot_index_positions"]),
    ("written_ring_slots", {"ring_slots": "written"}, ["slot_index_positions"]),
    ("query_index", {"query_index": True}, ["slot_index_positions"]),
    ("window_plus_one", {"window_delta": 1}, ["window_off_by_one"]),
    ("window_minus_one", {"window_delta": -1}, ["window_off_by_one"]),
    ("no_lower_bound", {"no_lower_bound": True}, ["window_ignored"]),
    ("empty_visible", {"empty_visible": True}, ["empty_slots_visible"]),
    ("append_first", {"append_first": True}, ["append_before_attend"]),
    ("late_queries", {"append_first": True, "late_queries": True},
     ["queries_after_append"]),
    ("capacity_window", {"window_is_capacity": True}, ["window_is_capacity"]),
]
RIGHT = Mistakes()  # no mistake: variant_mask(RIGHT, ...) is the rule (the oracle tests pin it)
STEP_ONLY = {"query_slot", "ring_slots", "written_ring_slots", "append_first", "late_queries", "capacity_window"}


@dataclass(frozen=True)
class Combination:
    """At most two atoms of ``ATOMS`` together, and the mistakes they make."""
    atoms: tuple  # atom names
    mistakes: Mistakes

    @property
    def ids(self) -> list[str]:
        found = []
        for name, _, ids in ATOMS:
            if name in self.atoms:
                found += [i for i in ids if i not in found]
        return found


def _combine(atoms) -> Mistakes | None:
    fields: dict = {}
    for name in atoms:
        for key, value in dict(ATOMS[[a[0] for a in ATOMS].index(name)][1]).items():
            if fields.get(key, value) != value:
                return None
            fields[key] = value
    m = Mistakes(**fields)
    if m.empty_visible and m.key_index:  # indices are never -1: nothing to hide
        return None
    if (m.no_lower_bound or m.window_is_capacity) and m.window_delta:
        return None
    if m.ring_slots and (m.append_first or m.key_index):  # the same as key_index after an append
        return None
    return m


def _variants(names) -> list[Combination]:
    seen, out = set(), []
    for size in (1, 2):
        for atoms in itertools.combinations(names, size):
            m = _combine(atoms)
            if m is not None and m not in seen:
                seen.add(m)
                out.append(Combination(atoms, m))
    return out


def mask_variants() -> list[Combination]:
    return _variants([a[0] for a in ATOMS if a[0] not in STEP_ONLY])


def step_variants() -> list[Combination]:
    return _variants([a[0] for a in ATOMS])


def variant_mask(m: Mistakes, q_positions, k_positions, window: int, capacity: int | None = None):
    """The mask a submission with mistakes ``m`` builds (positions as it believes them)."""
    q = np.arange(len(q_positions)) if m.query_index else np.asarray(q_positions, dtype=np.int64)
    if m.query_slot:
        q = q % capacity
    k = np.arange(len(k_positions)) if m.key_index else np.asarray(k_positions, dtype=np.int64)
    q, k = q[:, None], k[None, :]
    seen = k <= q
    if not m.no_lower_bound:  # q - k, not q - W: a window of 2^63 - 1 plus one would leave int64
        reach = (capacity if m.window_is_capacity else window) + m.window_delta
        seen &= (q - k) < min(reach, np.iinfo(np.int64).max)
    if not (m.empty_visible or m.key_index):
        seen &= k >= 0
    return seen


# -- sentences ---------------------------------------------------------------------------


def positions_text(positions) -> str:
    """'4 keys (positions 3..6)', '10 keys (positions 8..16, 18)', plus empty slots; 'no key at all'."""
    if isinstance(positions, range) and len(positions) > 1:  # a window's positions: 2^62 of them, say
        return f"{len(positions)} keys (positions {positions[0]}..{positions[-1]})"
    positions = [int(p) for p in positions]
    real = sorted(p for p in positions if p >= 0)
    empty = len(positions) - len(real)
    runs = []  # [first, last] of each run of consecutive positions
    for p in real:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    shown = ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in runs[:4]) + (", ..." if len(runs) > 4 else "")
    if not real:
        text = ""
    elif len(real) == 1:
        text = f"position {real[0]}"
    else:
        text = f"{len(real)} keys (positions {shown})"
    if empty:
        text += (" and " if text else "") + f"{empty} empty slot{'s' * (empty > 1)}"
    return text or "no key at all"


def wanted_positions(p: int, window: int) -> range:
    """The positions the query at ``p`` sees under ``window``: a range, never a list (windows reach 2^63)."""
    return range(max(0, p - window + 1), p + 1)


@dataclass
class Example:
    """The first query where a variant differs from the rule: what the sentences quote."""
    p: int
    seen: list
    window: int
    capacity: int | None = None
    chunk_start: int | None = None
    chunk_len: int | None = None
    chunk_rows: list | None = None  # [(query position, positions it sees)] for the whole chunk


def sentence(diagnosis_id: str, atoms, e: Example) -> str:
    saw = f"the query at position {e.p} sees {positions_text(e.seen)}"
    want = positions_text(wanted_positions(e.p, e.window))
    W, C = e.window, e.capacity
    chunk = (f"the {e.chunk_len}-token chunk at positions {e.chunk_start}..{e.chunk_start + e.chunk_len - 1}"
             if e.chunk_len else "the chunk")
    if diagnosis_id == "slot_index_positions":
        if "query_index" in atoms:
            return f"query rows are taken as positions 0..T-1 instead of q_positions: {saw}, not {want}"
        if {"append_first", "query_slot", "ring_slots", "written_ring_slots"} & set(atoms):
            ring = f" (capacity {C}: slot s holds position s only until the ring wraps)"
        else:
            ring = " (key j of the array given to the mask is not position j)"
        how = "and queries by their slot p % capacity " if "query_slot" in atoms else ""
        return (f"keys are placed by their slot index {how}rather than by the position stored with "
                f"them{ring}: {saw}, not {want}")
    if diagnosis_id == "window_off_by_one":
        if "window_plus_one" in atoms:
            return (f"the window admits W + 1 = {W + 1} keys: {saw}, but window {W} means {want}, the "
                    f"query and the {W - 1} before it (FlashAttention's window_size=({W - 1}, 0))")
        return (f"the window admits only W - 1 = {W - 1} keys: {saw}, but window {W} means {want}; "
                "W counts the query itself")
    if diagnosis_id == "window_is_capacity":
        return (f"the window is the ring's capacity {C}, not the window {W} asked for: {saw}, not {want} "
                "(Mistral's rotating buffer ties the sliding window to the cache size; here they differ)")
    if diagnosis_id == "window_ignored":
        return f"the window's lower bound k > p - W is missing: {saw}, not only the last {W}: {want}"
    if diagnosis_id == "empty_slots_visible":
        return (f"empty slots (position -1) are attended to: before the ring fills, {saw} where it "
                f"should see {want}; a slot that was never written is never visible")
    if diagnosis_id == "append_before_attend":
        return (f"the chunk is written into the ring before its queries attend: with capacity {C} and "
                f"window {W}, {chunk} overwrites slots its earlier queries still need, so {saw} "
                f"instead of {want}")
    if diagnosis_id == "queries_after_append":
        late = (f"{e.chunk_start + e.chunk_len}..{e.chunk_start + 2 * e.chunk_len - 1}"
                if e.chunk_len else "T positions too late")
        return (f"query positions are counted from len(cache) after the append: {chunk} is treated as "
                f"positions {late}, so {saw} instead of {want}")
    raise KeyError(diagnosis_id)


def sentences(variant: Combination, example: Example) -> list[tuple[str, str]]:
    return [(i, sentence(i, variant.atoms, example)) for i in variant.ids]


# -- window_mask ---------------------------------------------------------------------------


def _first_difference(mask, want, q_positions, k_positions, window) -> Example | None:
    rows = np.flatnonzero((mask != want).any(axis=1))
    if not rows.size:
        return None
    i = int(rows[0])
    return Example(int(q_positions[i]), list(np.asarray(k_positions)[mask[i]]), window)


def diagnose_masks(cases, passes=()) -> list[tuple[str, str]]:
    """[(id, sentence)] for the known mistake that explains every (mask, q_positions, k_positions,
    window) case, or [] when none does or when the fewest-mistake explanations disagree. ``passes``,
    (q_positions, k_positions, window) calls the answer got right, refute a mistake that would have
    got one wrong (as checking.explain's do)."""
    if not cases:
        return []
    matching = [(v, None) for v in mask_variants()
                if all(np.array_equal(variant_mask(v.mistakes, q, k, w), oracle.window_mask(q, k, w))
                       for q, k, w in passes)]
    for mask, q_positions, k_positions, window in cases:
        want = oracle.window_mask(q_positions, k_positions, window)
        here = []
        for variant, _ in matching:
            candidate = variant_mask(variant.mistakes, q_positions, k_positions, window)
            if np.array_equal(mask, candidate) and not np.array_equal(candidate, want):
                here.append((variant, _first_difference(candidate, want, q_positions, k_positions, window)))
        matching = here
    chosen = _unambiguous(matching)
    return sentences(*chosen) if chosen else []


def _unambiguous(found):
    """The fewest-mistake (variant, example) when all such variants name the same mistakes."""
    if not found:
        return None
    fewest = min(len(v.atoms) for v, _ in found)
    best = [(v, e) for v, e in found if len(v.atoms) == fewest]
    return best[0] if len({tuple(sorted(v.ids)) for v, _ in best}) == 1 else None


# -- windowed_attention_step over a stream --------------------------------------------------


def _softmax_rows(scores, mask, values):
    """Masked attention, vectorised; rows that see nothing are NaN."""
    s = np.where(mask, scores, -np.inf)
    top = s.max(axis=1, keepdims=True)
    empty = ~mask.any(axis=1)
    top[empty] = 0.0
    w = np.exp(s - top)
    out = (w / np.where(empty, 1.0, w.sum(axis=1))[:, None]) @ values
    out[empty] = np.nan
    return out


def magnitude(q, k) -> float:
    """A bound on the scaled scores |q . k| / sqrt(D) of a stream: section 1's m."""
    if not len(q) or not len(k):
        return 1.0
    return float(np.linalg.norm(q, axis=1).max() * np.linalg.norm(k, axis=1).max() / np.sqrt(q.shape[1]))


def same_output(submitted, expected, inputs=(), m: float = 1.0) -> bool:
    """Equal within section 1's rule (``checking.close``, scores up to ``m``); a row that sees no
    key may come back as NaN or as zeros."""
    empty = np.isnan(expected).all(axis=1)
    if not checking.close(submitted[~empty], expected[~empty], inputs, m):
        return False
    rows = submitted[empty]
    return bool(np.all(~np.isfinite(rows).all(axis=1) | (rows == 0).all(axis=1)))


def replay(variants, capacity, window, q, k, v, chunks, submitted=None):
    """Run a stream through each variant; keep those whose outputs match ``submitted`` (if given).

    Returns {variant: (outputs [N, D], first Example where it breaks the rule or None)}.
    """
    ring = oracle.Ring(capacity, q.shape[1])
    alive = {var: ([], None) for var in variants}
    m_bound = magnitude(q, k)
    start = 0
    for chunk_index, T in enumerate(chunks):
        part = slice(start, start + T)
        q_pos = start + np.arange(T)
        before = (np.concatenate([ring.keys, k[part]]), np.concatenate([ring.values, v[part]]),
                  np.concatenate([ring.positions, q_pos]))
        ring_before = ring.positions.copy()
        ring.append(k[part], v[part])
        after = (ring.keys.copy(), ring.values.copy(), ring.positions.copy())
        scores = {}
        for var in list(alive):
            m = var.mistakes
            keys, values, k_pos = after if m.append_first else before
            if m.append_first not in scores:
                scores[m.append_first] = q[part] @ keys.T / np.sqrt(q.shape[1])
            believed_q = q_pos + T if m.late_queries else q_pos
            believed_k = k_pos
            if m.ring_slots:
                slots = np.arange(capacity)
                if m.ring_slots == "written":
                    slots = np.where(ring_before >= 0, slots, -1)
                believed_k = np.concatenate([slots, q_pos])
            mask = variant_mask(m, believed_q, believed_k, window, capacity)
            out = _softmax_rows(scores[m.append_first], mask, values)
            if submitted is not None and not same_output(submitted[chunk_index], out, (q, k, v), m_bound):
                del alive[var]
                continue
            outputs, example = alive[var]
            outputs.append(out)
            if example is None:
                rows = [(int(p), sorted(int(x) for x in k_pos[mask[i]])) for i, p in enumerate(q_pos)]
                wrong = [(p, seen) for p, seen in rows if seen != list(wanted_positions(p, window))]
                if wrong:
                    example = Example(wrong[0][0], wrong[0][1], window, capacity, start, T, rows)
            alive[var] = (outputs, example)
        start += T
    return {var: (np.concatenate(outs), example) for var, (outs, example) in alive.items()}


def diagnose_streams(streams):
    """([(id, sentence)], Example, index of the stream quoted) of the fewest-mistake combination
    whose outputs equal the submission's in EVERY failing stream; ([], None, 0) when none does or
    the fewest-mistake ones name different mistakes (as W - 1 and late queries do when T = 1).

    ``streams``: (submitted outputs chunk by chunk, capacity, window, q, k, v, chunks) of each
    failing stream, the one to quote first. A pair is quoted from the first stream where
    neither of its atoms alone fits, so each sentence quotes a query its own mistake changed.
    """
    if not streams:
        return [], None, 0
    survivors, fitting = step_variants(), []  # fitting: per stream, {combination: its Example}
    for submitted, capacity, window, q, k, v, chunks in streams:
        alive = replay(survivors, capacity, window, q, k, v, chunks, submitted)
        # a combination that keeps to the rule all along cannot explain a stream that went wrong
        fitting.append({var: example for var, (_, example) in alive.items() if example is not None})
        survivors = [var for var in survivors if var in fitting[-1]]
        if not survivors:
            return [], None, 0
    chosen = _unambiguous([(var, fitting[0][var]) for var in survivors])
    if not chosen:
        return [], None, 0
    alone = [var for var in step_variants() if len(var.atoms) == 1 and var.atoms[0] in chosen[0].atoms]
    quoted = next((n for n, here in enumerate(fitting) if not any(a in here for a in alone if a != chosen[0])), 0)
    return sentences(chosen[0], fitting[quoted][chosen[0]]), fitting[quoted][chosen[0]], quoted


def diagnose_stream(submitted_chunks, capacity, window, q, k, v, chunks):
    """``diagnose_streams`` of one stream: ([(id, sentence)], Example)."""
    return diagnose_streams([(submitted_chunks, capacity, window, q, k, v, chunks)])[:2]
