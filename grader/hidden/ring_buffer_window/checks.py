"""Hidden checks for ring_buffer_window. Each ``check_*`` is one stable check id (without the prefix).

Streams: a whole sequence q, k, v [N, D] is fed to a fresh cache in chunks; every output is
compared with sliding-window attention over the whole sequence (the oracle). The cache state
and ``window_mask`` are also checked on their own, so a submission wrong in one part only is
failed (and diagnosed) in that part only. A check tries all its cases (masks, streams, caches
appended to) before it fails, reports the smallest failing one, and names a mistake only when it
explains every failing case: masks and streams through ``diagnosis``, cache states through
``checking.settle``. A failing stream is shown shrunk: cut after its first wrong step, then
``grader.stateful.shrink`` drops chunks while the rest still fails (the names still come from the
whole streams).

One sentence, one property (CONTRACT section 1 and ring_buffer_window's section -> check id):

| sentence | check |
|---|---|
| keys, values [capacity, head_dim]; positions int64, -1 = empty | fresh_cache |
| len = tokens appended; append writes slot position % capacity | append_wraps_slots, append_longer_than_capacity |
| window_mask: k <= p and k > p - W (W keys, itself included), -1 never | window_mask_* |
| windowed_attention_step: positions len .. len + T - 1, last W each, scale 1/sqrt(D) | decode_stream, chunked_stream, |
| | window_one, window_equals_capacity |
| ... and leaves them appended | step_leaves_tokens_appended |
| window <= capacity; T > 1; a chunk may overwrite slots its earlier queries need | chunk_overwrites_needed_slots, |
| | chunk_longer_than_capacity |
| empty slots never attended | before_the_ring_fills |
| never-attended slots hold any finite value (1e30) | slots_outside_the_window |
| positions of any size (2^31) | long_positions |
| numpy integers for ints (int8 too), lists for index arrays | numpy_integer_arguments |
| positions of any signed dtype, a window wider than it | |
| invalid arguments (float sizes, past int64, empty inputs): ValueError, nothing changed | rejects_invalid_arguments |
| ... so later steps answer as if none had been made | steps_after_rejected_calls |
| (public tests) the invalid call they show raises ValueError, in a live grading too | rejects_the_invalid_case_shown |
| right values in another container or dtype: hygiene | returns_arrays |
| precision follows the inputs | every stream (checking.off_by) |
| arguments unchanged, results the caller's; calls in any order | (the toolkit's ownership and call-order probes) |
| the cache keeps its own copy: a caller reusing its q, k, v after a call changes nothing; | keeps_its_own_copy |
| no later call changes an argument (a view of a chunk kept as the cache's keys included) | |
| scores anywhere in [-1e4, 1e4]; float32 inputs | extreme_scores |
| calls in any order: float64 caches after a float32 one's steps (no dtype kept); | float32_cache_first |
| float32 calls (first, midway, refused) in one cache whose storage stays float64 | |
| each cache is its own: three of one size, steps interleaved, one made midway | caches_side_by_side |
| window is each step's own: a new window every step on one cache | window_changes_between_steps |

Sentences no check here holds as such: the empty slots of the candidate's own fresh ring
cannot be filled with garbage by the grader, so only slots it wrote are tried with extreme values.
"""
import sys
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from grader.checking import (
    SHOWN,
    Explanation,
    Miss,
    all_refused,
    as_array,
    chunk_sizes,
    close,
    container_slip,
    error_of,
    expect_rejected,
    fail,
    garbage,
    grid_picture,
    misfit_calls,
    name_mistakes,
    odd_size_closed,
    off_by,
    offset_scores,
    other_argument_types,
    past_int64,
    same_bytes,
    settle,
)
from grader.held import ARGUMENT_CHANGED, Held
from grader.sandbox import CandidateRaised
from grader.stateful import shrink

from . import diagnosis, oracle

INVALID = "accepts_invalid_arguments"  # the diagnosis for an invalid call that raised no ValueError


# -- the cache ------------------------------------------------------------------------------


def _state_miss(cache, ring: oracle.Ring, case, after: str) -> Miss | None:
    """How the candidate's cache differs from the ring oracle (filled slots only, for keys/values),
    or None when it holds the same; cache.positions that are the slot indices fit slot_index_positions."""
    C, D = ring.keys.shape
    size = ring.length + C  # the smallest ring, fewest tokens: the case to report
    length = len(cache)
    if length != ring.length:
        return Miss(size, f"len(cache) is {length} {after}; expected {ring.length} (tokens appended so far)",
                    case, kind="corrupt")
    positions = as_array(cache.positions, call="cache.positions", shape=(C,), kind="i", case=case)
    if not np.array_equal(positions, ring.positions):
        slot = int(np.flatnonzero(positions != ring.positions)[0])
        found = []
        if ring.length > C and np.array_equal(positions, np.where(ring.positions >= 0, np.arange(C), -1)):
            found.append(("slot_index_positions",
                          (f"the cache records slot indices, not positions: after {ring.length} tokens in "
                          f"a ring of {C}, slot {slot} holds position {ring.positions[slot]}, not {slot}")))
        return Miss(size, f"cache.positions {after} is {_short(positions)}; expected {_short(ring.positions)} "
                          f"(slot {slot} should hold position {ring.positions[slot]}, found {positions[slot]})",
                    case, kind="corrupt", found=found)
    filled = ring.positions >= 0
    for name, want in (("keys", ring.keys), ("values", ring.values)):
        got = as_array(getattr(cache, name), call=f"cache.{name}", shape=(C, D), kind="f", case=case)
        bad = np.flatnonzero(off_by(got, want).any(axis=1) & filled)
        if bad.size:
            slot = int(bad[0])
            return Miss(size, f"cache.{name}[{slot}] {after} is not the row of position {ring.positions[slot]} "
                              f"(slot = position % {C}); {bad.size} of {int(filled.sum())} written slots differ",
                        case, kind="corrupt")
    return None


def _short(a) -> str:
    a = [int(x) for x in a]
    return str(a) if len(a) <= 12 else f"[{', '.join(map(str, a[:12]))}, ...] ({len(a)} slots)"


def _append_stream(ex, C, D, sizes) -> Miss | None:
    """Append chunks of the given sizes to a fresh cache; the first state that differs, if any."""
    rng = ex.rng
    cache = ex.candidate.call("RingKVCache", C, D)
    ring = oracle.Ring(C, D)
    done = 0
    for n, T in enumerate(sizes):
        k, v = rng.standard_normal((T, D)), rng.standard_normal((T, D))
        cache.call("append", k, v)
        ring.append(k, v)
        done += T
        case = {"capacity": C, "head_dim": D, "chunks": _short(sizes[:n + 1]), "seed": ex.seed}
        miss = _state_miss(cache, ring, case, f"after appending {done} tokens in chunks {_short(sizes[:n + 1])}")
        if miss:
            return miss
    return None


def check_float32_cache_first(ex):
    """The module's first steps are on a float32 cache, the next on float64 ones: nothing kept from an
    earlier call (a score buffer, a mask) carries its dtype into another cache's steps. It runs first,
    so no earlier check has fixed any such dtype. Then single caches fed float32 calls among float64
    ones (first, midway, and refused ones): the storage stays float64, as the prompt has it, so the
    cache holds every token exactly after each call, and outputs whose window holds float64 tokens
    only are judged at float64's precision."""
    rng, streams = ex.rng, []
    for dtype in (np.float32, np.float64, np.float64):
        C = odd_size_closed(rng, 9, 27)  # a stream wraps the ring at least once: no longer is needed
        W = int(rng.integers(2, C - 1))
        s = make_stream(rng, C, W, chunk_sizes(rng, odd_size_closed(rng, 30, 60), 1, C - W + 1))
        streams.append((Stream(C, W, s.chunks, *(x.astype(dtype) for x in (s.q, s.k, s.v))),
                        f"{np.dtype(dtype)} inputs, after a float32 cache's steps"))
    expect_streams(ex, streams)
    misses = []
    for first in (("refused", "append"), ("step",)):  # the storage set by a refused call, or the first write
        C = odd_size_closed(rng, 5, 11)
        W = int(rng.integers(2, C))  # W < C: windows move past a float32 chunk within the ring
        misses.append(_mixed_dtype_miss(ex, C, W, _mixed_plan(rng, C, W, first)))
    settle(ex, misses)


def _mixed_plan(rng, C, W, first) -> list[tuple[str, int, type]]:
    """(call, T, dtype) for one cache: the calls ``first`` in float32, then float64 steps past a window, a
    refused float32 step, a float32 append, a float32 step, each followed by float64 steps past a window
    (so any call's dtype, whenever it comes, has float64 tokens to round and windows free of float32)."""
    def float64_steps():
        return [("step", T, np.float64) for T in chunk_sizes(rng, W + 3, 1, C - W + 1)]
    plan = [(call, int(rng.integers(1, C)), np.float32) for call in first] + float64_steps()
    for call in ("refused", "append", "step"):
        plan += [(call, int(rng.integers(1, C)), np.float32)] + float64_steps()
    return plan


def _mixed_dtype_miss(ex, C, W, plan) -> Miss | None:
    """Feed ``plan`` to one cache ("refused": a step with window capacity + 1). After each float32 call, the
    call after it and the last, the cache must hold every token as passed (float64 ones unrounded); a step's
    rows are judged at float32's precision when their window holds a float32 token, else at float64's."""
    rng, D = ex.rng, odd_size_closed(ex.rng, 3, 9)
    sizes = [T for call, T, _ in plan if call != "refused"]
    q, k, v = (rng.standard_normal((sum(sizes), D)) for _ in range(3))
    low = np.repeat([dtype == np.float32 for call, _, dtype in plan if call != "refused"], sizes)
    for x in (q, k, v):
        x[low] = x[low].astype(np.float32)  # exactly the values passed in float32
    want, m = oracle.sliding_window_attention(q, k, v, W), diagnosis.magnitude(q, k)
    cache, ring, start = ex.candidate.call("RingKVCache", C, D), oracle.Ring(C, D), 0
    calls = [f"{call} {np.dtype(dtype)} T={T}" + (f" window={C + 1}" if call == "refused" else "")
             for call, T, dtype in plan]
    for n, (call, T, dtype) in enumerate(plan):
        case = {"capacity": C, "head_dim": D, "window": W, "calls": calls[:n + 1], "seed": ex.seed}
        part = slice(start, start + T)
        q32, k32, v32 = (x[part].astype(dtype) for x in (q, k, v))
        said = f"{', '.join(calls[:n + 1])} (window {W}) on RingKVCache({C}, {D})"
        if call == "refused":
            try:
                ex.candidate.windowed_attention_step(cache, q32, k32, v32, C + 1)
            except CandidateRaised:  # a refusal of any kind: what follows must not feel its dtype
                if len(cache) == ring.length:
                    continue
            return None  # accepted, or refused after a write: rejects_invalid_arguments says so
        if call == "append":
            cache.call("append", k32, v32)
        else:
            out = ex.candidate.call("windowed_attention_step", cache, q32, k32, v32, W)
            got = as_array(out, call=f"the last step of {said}", shape=(T, D), kind="f", case=case)
            wrong = _mixed_row_miss(got, want[part], low, start, W, m)
            if wrong:
                return Miss(n, f"the last step of {said} {wrong}" + _storage(cache, lead=False), case,
                            kind="wrong" if np.isfinite(got).all() else "nan")
        ring.append(k[part], v[part])
        near = any(dtype == np.float32 for _, _, dtype in plan[max(0, n - 1):n + 1]) or n == len(plan) - 1
        miss = _state_miss(cache, ring, case, f"after {said}") if near else None  # a rounding shows by then
        if miss:
            miss.message = _storage(cache, lead=True) + miss.message
            return miss
        start += T
    return None


def _mixed_row_miss(got, want, low, start, W, m) -> str:
    """What is wrong with the first row of a step's outputs off beyond its precision, or '': float32's
    when the row's window holds a float32 token (``low``), float64's when it holds float64 ones only."""
    for row, p in enumerate(range(start, start + len(got))):
        eps = np.float32(0) if low[max(0, p - W + 1):p + 1].any() else np.float64(0)
        if off_by(got[row], want[row], (eps,), m).any():
            error = error_of(got[row], want[row])
            return (f"differs from sliding-window attention at position {p} by {error:.3g}, beyond "
                    f"{eps.dtype}'s precision" + ("" if eps.dtype == np.float32 else
                                                 " (its window holds float64 tokens only: an earlier float32 "
                                                 "call must not set the dtype of later float64 steps)"))
    return ""


def _storage(cache, lead: bool) -> str:
    """A sentence on the cache's storage dtype when it is not the prompt's float64, else ''."""
    dtypes = {np.asarray(getattr(cache, name)).dtype for name in ("keys", "values")}
    if dtypes == {np.dtype(np.float64)}:
        return ""
    sentence = (f"cache.keys/values are {'/'.join(sorted(map(str, dtypes)))}: the prompt stores float64 whatever "
                "a call passes (a storage dtype taken from one call's inputs rounds the float64 tokens)")
    return f"{sentence}; " if lead else f"; {sentence}"


def check_caches_side_by_side(ex):
    """Three caches of the same capacity and head_dim, the third made midway, their steps interleaved:
    each answers for its own tokens only and holds them (nothing is shared between instances)."""
    rng = ex.rng
    C = odd_size_closed(rng, 9, 40)
    W = int(rng.integers(2, C - 1))
    D = odd_size_closed(rng, 3, 40)
    streams = []
    for _ in range(3):
        chunks = chunk_sizes(rng, odd_size_closed(rng, 40, 90), 1, C - W + 1)
        streams.append(Stream(C, W, chunks, *(rng.standard_normal((sum(chunks), D)) for _ in range(3))))
    wants = [oracle.sliding_window_attention(s.q, s.k, s.v, W) for s in streams]
    caches, starts, rings = [None] * 3, [0] * 3, [oracle.Ring(C, D) for _ in range(3)]
    for n in range(max(len(s.chunks) for s in streams)):
        for i, s in enumerate(streams):
            if n >= len(s.chunks) or (i == 2 and n < len(streams[0].chunks) // 2):
                continue  # the third cache is made once the others are midway
            if caches[i] is None:
                caches[i] = ex.candidate.call("RingKVCache", C, D)
            T, start = s.chunks[n], starts[i]
            part = slice(start, start + T)
            said = (f"windowed_attention_step on cache {i + 1} of 3 (each RingKVCache({C}, {D}), steps interleaved) "
                    f"for its positions {start}..{start + T - 1}, window {W}")
            out = ex.candidate.call("windowed_attention_step", caches[i], s.q[part], s.k[part], s.v[part], W)
            got = as_array(out, call=said, shape=(T, D), kind="f", case=s.case(ex.seed))
            rings[i].append(s.k[part], s.v[part])
            if s.wrong_rows(got, wants[i][part]).any():
                fail(f"{said} differs from sliding-window attention over that cache's own tokens: each cache "
                     "holds its own tokens (storage shared between instances, or kept at class or module "
                     "level, mixes them)", s.case(ex.seed))
            starts[i] += T
    settle(ex, [_state_miss(cache, ring, {"capacity": C, "head_dim": D, "window": W, "seed": ex.seed},
                            f"for cache {i + 1} of 3 after interleaved steps")
                for i, (cache, ring) in enumerate(zip(caches, rings)) if cache is not None])


def check_window_changes_between_steps(ex):
    """window is each step's own argument: steps on one cache with a new window each (1 to the capacity)
    answer over their own window's last positions (nothing kept from an earlier step's window)."""
    rng = ex.rng
    C, D = odd_size_closed(rng, 9, 40), odd_size_closed(rng, 3, 30)
    cache, wants, start = ex.candidate.call("RingKVCache", C, D), {}, 0
    N = C * int(rng.integers(5, 8))  # the ring wraps often: a step's slots and length recur with new windows
    q, k, v = (rng.standard_normal((N, D)) for _ in range(3))
    case = {"capacity": C, "head_dim": D, "seed": ex.seed}
    windows = []
    while start < N:
        W = int(rng.integers(1, C + 1))
        T = min(N - start, 1 if rng.random() < 0.6 else int(rng.integers(1, C - W + 2)))
        windows.append(W)
        part = slice(start, start + T)
        if W not in wants:
            wants[W] = oracle.sliding_window_attention(q, k, v, W)
        said = (f"windowed_attention_step(cache, q, k, v, window={W}) for positions {start}..{start + T - 1}, "
                f"after steps with windows {_short(windows[:-1])}")
        out = ex.candidate.call("windowed_attention_step", cache, q[part], k[part], v[part], W)
        got = as_array(out, call=said, shape=(T, D), kind="f", case=case | {"windows": _short(windows)})
        if off_by(got, wants[W][part], (q, k, v), diagnosis.magnitude(q, k)).any() or not np.isfinite(got).all():
            fail(f"{said} differs from sliding-window attention with window {W}: the window is each step's own "
                 "argument (a mask or plan kept from an earlier step's window answers with the wrong one)",
                 case | {"windows": _short(windows)})
        start += T


def check_fresh_cache(ex):
    """A new cache is empty: len 0, every position -1, keys and values of shape [capacity, head_dim]."""
    sizes = [(1, 1), (7, 3), (45, 67), (odd_size_closed(ex.rng, 9, 200), odd_size_closed(ex.rng, 3, 100))]
    settle(ex, [_state_miss(ex.candidate.call("RingKVCache", C, D), oracle.Ring(C, D),
                            {"capacity": C, "head_dim": D}, "for a new cache") for C, D in sizes])


def check_append_wraps_slots(ex):
    """append writes position p to slot p % capacity and records p, wrapping many times (T = 1 and T > 1)."""
    rng, misses = ex.rng, []
    for _ in range(2):
        C, D = odd_size_closed(rng, 5, 40), odd_size_closed(rng, 2, 24)
        sizes = chunk_sizes(rng, odd_size_closed(rng, 6 * C, 8 * C), 2, C)[:15]  # ~7 laps: more add calls, not cover
        misses.append(_append_stream(ex, C, D, sizes))
    settle(ex, misses)


def check_append_longer_than_capacity(ex):
    """A chunk longer than the whole ring leaves its last capacity tokens in their slots."""
    rng, misses = ex.rng, []
    for C in (1, 7, odd_size_closed(rng, 10, 30)):
        D = odd_size_closed(rng, 2, 9)
        misses.append(_append_stream(ex, C, D, [C + int(rng.integers(1, 3 * C + 2)), 1, 2 * C + 1]))
    settle(ex, misses)


# -- window_mask ------------------------------------------------------------------------------


def _mask(ex, q_pos, k_pos, W, case):
    call = f"window_mask(q_positions[{len(q_pos)}], k_positions[{len(k_pos)}], window={W})"
    mask = as_array(ex.candidate.call("window_mask", q_pos, k_pos, W), call=call,
                    shape=(len(q_pos), len(k_pos)), kind="bi", case=case)
    return mask.astype(bool) if mask.dtype.kind != "b" and set(np.unique(mask).tolist()) <= {0, 1} else mask


def _expect_masks(ex, cases, what, passed=()):
    """Each (q_positions, k_positions, W) must give the oracle's mask; report the smallest failure. ``passed``:
    calls the answer already got right (a mistake named must be one that would not have failed them)."""
    failures, passes = [], list(passed)
    for q_pos, k_pos, W in cases:
        case = {"q_positions": _short(q_pos), "k_positions": _short(k_pos), "window": W, "seed": ex.seed}
        got, want = _mask(ex, q_pos, k_pos, W, case), oracle.window_mask(q_pos, k_pos, W)
        if not np.array_equal(got, want):
            failures.append((got.size, q_pos, k_pos, W, got, want, case))
        else:
            passes.append((q_pos, k_pos, W))
    if not failures:
        return
    narrow = _narrow_positions(failures)
    found = [] if narrow else diagnosis.diagnose_masks([(f[4], f[1], f[2], f[3]) for f in failures], passes)
    _, q_pos, k_pos, W, got, want, case = min(failures, key=lambda f: f[0])
    row, col = (int(x) for x in np.argwhere(got != want)[0])
    message = (f"window_mask over {what} (window {W}) differs from the rule in {int((got != want).sum())} "
               f"of {got.size} cells; first: query at position {q_pos[row]}, key at position "
               f"{k_pos[col]} (column {col}): expected {bool(want[row, col])}")
    message += narrow or name_mistakes(ex, Explanation(found))
    fail(message, case, grid_picture(want, got, f"window_mask, window {W}: rows are queries "
                                                f"(positions {_short(q_pos)}), columns keys "
                                                f"(positions {_short(k_pos)})"))


_NARROWED = [  # (past what, the positions as kept, what is said): positions kept too narrow for their size
    (2**31 - 1, lambda a: a.astype(np.int32).astype(np.int64), "positions kept in int32, which wrap past 2^31"),
    (2**53, lambda a: a.astype(np.float64), "positions computed in float64, which rounds integers past 2^53"),
]


def _narrow_positions(failures) -> str:
    """A hint, or '': every failing mask is the rule's on the positions as int32 wraps them or float64 rounds
    them, and some pass 2^31 or 2^53. Slot-index and window readings can fit such masks too (positions that
    wrap or round alike look unordered or the same), so none is named then."""
    far = max(np.abs(np.asarray(a, np.int64)).max(initial=0) for f in failures for a in f[1:3])
    for limit, kept, what in _NARROWED:
        if far > limit and all(np.array_equal(f[4], oracle.window_mask(*(kept(np.asarray(a, np.int64))
                                                                          for a in f[1:3]), f[3]))
                               for f in failures):
            return (f"; consistent with {what} (positions are as large as the sequence: keep them in int64 or "
                    "Python ints)")
    return ""


def _ring_positions(length, C):
    ring = oracle.Ring(C, 1)
    ring.append(np.zeros((length, 1)), np.zeros((length, 1)))
    return ring.positions


def check_window_mask_dtype_and_shape(ex):
    """window_mask returns a numpy bool array of shape [T, C]."""
    for T, C in [(1, 1), (3, 7), (2, 45)]:
        q = np.arange(C, C + T, dtype=np.int64)
        _mask(ex, q, np.arange(C, dtype=np.int64), 2, {"T": T, "C": C})


def check_window_mask_contiguous(ex):
    """T > 1 queries, the last T of S contiguous positions: each sees the last W keys, itself included."""
    rng, cases = ex.rng, []
    for _ in range(20):
        S = odd_size_closed(rng, 3, 140)
        T, W = int(rng.integers(2, S + 1)), int(rng.integers(1, S + 1))
        cases.append((np.arange(S - T, S), np.arange(S), W))
    _expect_masks(ex, cases, "contiguous positions")


def check_window_mask_ring_positions(ex):
    """Ring-buffer positions: unsorted, with empty (-1) slots before the ring fills; then some of the same
    calls' bytes again as int32 positions (twice as many)."""
    rng, cases = ex.rng, []
    for n in range(24):
        C = odd_size_closed(rng, 3, 60)
        length = int(rng.integers(1, C)) if n % 3 == 0 else int(rng.integers(C + 1, 9 * C))
        W = int(rng.integers(1, C + 1))
        ring = _ring_positions(length, C)
        T = int(rng.integers(2, C + 1))
        if n % 2:  # the next chunk against the ring plus the chunk's own keys
            q = length + np.arange(T)
            cases.append((q, np.concatenate([ring, q]), W))
        else:  # the last T tokens against the ring
            T = min(T, length)
            cases.append((np.arange(length - T, length), ring, W))
    for _ in range(4):  # arbitrary order on both sides
        k = rng.permutation(np.concatenate([rng.choice(200, 30, replace=False), -np.ones(5, int)]))
        cases.append((rng.integers(0, 220, 9), k, int(rng.integers(1, 40))))
    cases += [_same_bytes(*case) for case in cases[-6:]]  # calls in any order: a memo keyed on bytes alone
    _expect_masks(ex, cases, "ring-buffer positions")


def _same_bytes(q_pos, k_pos, W):
    """The call whose position arrays hold the same bytes as ``q_pos``'s and ``k_pos``'s int64 ones, read as
    int32: twice as many positions, each followed by 0 (an empty slot's -1 becomes two -1s), all valid. A memo
    keyed on the arrays' bytes, without their dtype and shape, answers it with the first call's mask."""
    return tuple(same_bytes(a)[1] for a in (q_pos, k_pos)) + (W,)


def check_window_mask_boundaries(ex):
    """window = 1 sees only the query itself; a window longer than the sequence is plain causal, up to
    2^63 - 1 (sys.maxsize, Python's "no limit", which int64 holds); windows past 2^63 too, where a failure is
    hygiene."""
    rng, cases = ex.rng, []
    for _ in range(4):
        C = odd_size_closed(rng, 5, 40)
        ring = _ring_positions(int(rng.integers(C + 1, 5 * C)), C)
        q = np.sort(ring)[-3:]
        cases += [(q, ring, 1), (q, ring, C), (np.arange(C - 3, C), np.arange(C), 10 * C)]
    cases += [(q, ring, sys.maxsize), (q, ring, 2**62 + odd_size_closed(rng, 1, 999))]
    _expect_masks(ex, cases, "boundary windows")
    with past_int64("windows past int64"):  # Python ints hold any window
        _expect_masks(ex, [(q, ring, 2**63 + odd_size_closed(rng, 1, 999)), (q, ring, 2**70)], "boundary windows",
                      passed=cases)


# -- windowed_attention_step on streams ------------------------------------------------------


@dataclass
class Stream:
    capacity: int
    window: int
    chunks: list
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray

    @property
    def head_dim(self):
        return self.q.shape[1]

    live = slice(None)  # rows whose scores count for section 1's m (every row of a plain stream)

    def case(self, seed):
        return {"capacity": self.capacity, "head_dim": self.head_dim, "window": self.window,
                "tokens": len(self.q), "chunks": _short(self.chunks), "seed": seed}

    def keep(self, chunks) -> "Stream":
        """The stream with only the chunks at the indices ``chunks`` (in order): their tokens, at the
        positions they take once the others are gone. Any such stream is valid, so shrinking may try it."""
        starts = np.cumsum([0] + self.chunks)
        rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in chunks] or [np.zeros(0, int)])
        return Stream(self.capacity, self.window, [self.chunks[i] for i in chunks], self.q[rows], self.k[rows],
                      self.v[rows])

    def wrong_rows(self, got, want) -> np.ndarray:
        """Per row of a chunk: off beyond section 1's rule (scores bounded over the stream's own
        tokens; a slot of garbage that no query may see is not involved)."""
        live = self.live
        return off_by(got, want, (self.q, self.k, self.v), diagnosis.magnitude(self.q[live], self.k[live])).any(axis=1)


def make_stream(rng, capacity, window, chunks) -> Stream:
    D = odd_size_closed(rng, 3, 40)
    q, k, v = (rng.standard_normal((sum(chunks), D)) for _ in range(3))
    return Stream(capacity, window, chunks, q, k, v)


def _differs(got, want):
    """Per-row error of a chunk's outputs (NaN counts as infinite)."""
    return error_of(got, want, axis=1)


def run_stream(ex, s: Stream, watch_state=False, want=None, after_failure=8, caches=None):
    """Feed the stream to a fresh candidate cache; the outputs, chunk by chunk.

    With ``want`` (the oracle's outputs), it stops ``after_failure`` chunks after the first
    wrong one: enough to tell mistakes apart, without paying for the rest of the stream.
    ``caches``, a list, receives the cache, to be read once the stream is over.
    """
    cache = ex.candidate.call("RingKVCache", s.capacity, s.head_dim)
    if caches is not None:
        caches.append(cache)
    ring = oracle.Ring(s.capacity, s.head_dim) if watch_state else None
    outputs, start, stop = [], 0, len(s.chunks)
    for n, T in enumerate(s.chunks):
        if n >= stop:
            break
        part = slice(start, start + T)
        call = (f"windowed_attention_step(cache, q, k, v, window={s.window}) for positions "
                f"{start}..{start + T - 1} (RingKVCache({s.capacity}, {s.head_dim}))")
        out = ex.candidate.call("windowed_attention_step", cache, s.q[part], s.k[part], s.v[part], s.window)
        outputs.append(as_array(out, call=call, shape=(T, s.head_dim), kind="f", case=s.case(ex.seed)))
        if ring is not None:
            ring.append(s.k[part], s.v[part])
            after = f"after the step for positions {start}..{start + T - 1}"
            settle(ex, [_state_miss(cache, ring, s.case(ex.seed), after)])  # a broken cache stops the stream
        first_failure = stop == len(s.chunks)
        if want is not None and first_failure and s.wrong_rows(outputs[-1], want[part]).any():
            stop = n + 1 + after_failure
        start += T
    return outputs


def _stream_picture(example: diagnosis.Example, s: Stream, unshrunk: bool = False):
    rows = example.chunk_rows[:16]
    first = max(0, rows[0][0] - s.window - 1)
    last = rows[-1][0] + 1
    columns = range(first, last + 1)
    want = np.array([[c in diagnosis.wanted_positions(p, s.window) for c in columns] for p, _ in rows])
    seen = np.array([[c in set(visible) for c in columns] for _, visible in rows])
    where = "in the whole stream, before shrinking: " if unshrunk else ""
    return grid_picture(want, seen, f"{where}queries at positions {rows[0][0]}..{rows[-1][0]} (rows) over key "
                                    f"positions {first}..{last} (columns); 'submitted' = the keys your "
                                    "outputs are consistent with")


@dataclass
class StreamMiss:
    """A stream that went wrong: what to say about its first wrong step, and what to replay."""
    stream: Stream
    outputs: list  # the submission's outputs, chunk by chunk, as far as they were run
    message: str
    broken: bool  # some outputs are NaN or infinite
    chunks_fed: int  # chunks up to and including the first wrong step
    what: str  # what the stream tries


def _stream_miss(ex, s: Stream, what: str, after_failure: int = 8, caches=None) -> StreamMiss | None:
    want = oracle.sliding_window_attention(*(x.astype(np.float64) for x in (s.q, s.k, s.v)), s.window)
    outputs = run_stream(ex, s, want=want, after_failure=after_failure, caches=caches)
    start = 0
    for n, (T, got) in enumerate(zip(s.chunks, outputs)):
        error, wrong = _differs(got, want[start:start + T]), s.wrong_rows(got, want[start:start + T])
        if wrong.any():
            p = start + int(np.argmax(wrong))
            where = f"position {start}" if T == 1 else f"positions {start}..{start + T - 1}"
            message = (f"{what}: RingKVCache({s.capacity}, {s.head_dim}) fed {len(s.q)} tokens in "
                       f"{len(s.chunks)} chunks, window {s.window}; the step for {where} "
                       f"(chunk {n + 1}, T = {T}) returned outputs that differ "
                       f"from sliding-window attention over the whole sequence by up to {error.max():.3g} "
                       f"(first at position {p})")
            broken = not all(np.isfinite(out).all() for out in outputs)
            return StreamMiss(s, outputs, message + ("; some rows are NaN or infinite" if broken else ""), broken,
                              n + 1, what)
        start += T
    return None


def expect_streams(ex, streams):
    """Run every (stream, what it tries); fail with the smallest stream that went wrong, naming a
    mistake only when one combination of at most two explains every wrong stream."""
    caches = []
    misses = [m for m in (_stream_miss(ex, s, what, caches=caches) for s, what in streams) if m is not None]
    if not misses:  # every output right: the caches must hold what the steps appended
        settle(ex, [_final_state_miss(ex, s, what, cache) for (s, what), cache in zip(streams, caches)])
        return
    misses.sort(key=lambda m: len(m.stream.q))  # the smallest first: it is the one quoted, unless
    found, example, quoted = diagnosis.diagnose_streams(  # a pair shows both its mistakes in a later one
        [(m.outputs, m.stream.capacity, m.stream.window, m.stream.q, m.stream.k, m.stream.v,
          m.stream.chunks[:len(m.outputs)]) for m in misses])
    shown = misses[quoted]
    short = _shrunk(ex, shown)
    message = short.message + (f" (shrunk from {len(shown.stream.q)} tokens in {len(shown.stream.chunks)} chunks)"
                               if short is not shown else "")
    message += f"; {len(misses)} of {len(streams)} streams went wrong" if len(streams) > 1 else ""
    message += name_mistakes(ex, Explanation(found, _hint(shown) if not found and len(misses) > 1 else ""))
    picture = _stream_picture(example, shown.stream, unshrunk=short is not shown) if example else None
    fail(message, short.stream.case(ex.seed), picture, kind="nan" if any(m.broken for m in misses) else "wrong")


def _final_state_miss(ex, s: Stream, what: str, cache) -> Miss | None:
    """The cache after a whole stream against the ring oracle fed every token: a step whose outputs
    are right (a shortcut for one window) must still leave its tokens appended."""
    ring = oracle.Ring(s.capacity, s.head_dim)
    ring.append(s.k, s.v)
    return _state_miss(cache, ring, s.case(ex.seed), f"after the whole stream ({what}, {len(s.chunks)} steps)")


def _shrunk(ex, miss: StreamMiss) -> StreamMiss:
    """A short failing stream, found by ``grader.stateful.shrink`` dropping chunks of ``miss``'s
    stream, cut after its first wrong step: the case a report shows (the names come from the whole
    streams). ``miss`` itself when nothing shorter fails the same way again."""
    def play(chunks):
        return _stream_miss(ex, miss.stream.keep(chunks), miss.what, after_failure=0)

    chunks = list(range(miss.chunks_fed))
    start = play(chunks)  # the stream cut after its first wrong step: it fails there again
    if start is None:
        return miss
    return shrink(chunks, start, play)[1]


def _hint(miss: StreamMiss) -> str:
    """What the smallest stream alone looks like, when no mistake explains every stream."""
    s = miss.stream
    done = s.chunks[:len(miss.outputs)]
    alone, _ = diagnosis.diagnose_stream(miss.outputs, s.capacity, s.window, s.q, s.k, s.v, done)
    return f"consistent with {' and '.join(i for i, _ in alone).replace('_', ' ')} in this case" if alone else ""


def check_decode_stream(ex):
    """T = 1 decode over about a hundred tokens, three laps of the ring at least: every output matches
    full sliding-window attention."""
    rng = ex.rng
    C = odd_size_closed(rng, 9, 29)
    W = int(rng.integers(2, C - 1))  # W <= C - 2: a window of the capacity differs from W + 1
    expect_streams(ex, [(make_stream(rng, C, W, [1] * odd_size_closed(rng, 90, 110)), "plain decode (T = 1)")])


def check_chunked_stream(ex):
    """Chunks of random size (T = 1 and T > 1), wrapping the ring many times."""
    rng, streams = ex.rng, []
    for _ in range(3):
        C = odd_size_closed(rng, 20, 70)
        W = int(rng.integers(2, C - 5))  # chunks up to C - W + 1 >= 7 tokens: fewer calls
        chunks = chunk_sizes(rng, odd_size_closed(rng, 250, 400), 2, C - W + 1)
        streams.append((make_stream(rng, C, W, chunks), "chunked steps"))
    expect_streams(ex, streams)


def check_chunk_overwrites_needed_slots(ex):
    """capacity = window with chunks of T > 1, and chunks nearly as long as the ring."""
    rng = ex.rng
    C = odd_size_closed(rng, 5, 24)
    equal = make_stream(rng, C, C, chunk_sizes(rng, odd_size_closed(rng, 250, 330), 2, C, p_one=0.1))
    C = odd_size_closed(rng, 12, 40)
    W = int(rng.integers(C // 2, C - 1))
    long = make_stream(rng, C, W, chunk_sizes(rng, odd_size_closed(rng, 250, 330), C - W + 2, C, p_one=0))
    expect_streams(ex, [(equal, "capacity = window, chunks of T > 1"),
                        (long, "chunks long enough to overwrite keys their own queries need")])


def check_chunk_longer_than_capacity(ex):
    """A prompt longer than the whole cache in one chunk, then decode, another chunk longer than the
    cache (its first queries attend to keys from before it), and short chunks."""
    rng, streams = ex.rng, []
    for _ in range(2):
        C = odd_size_closed(rng, 5, 30)
        W = int(rng.integers(2, C - 1))
        chunks = ([C + int(rng.integers(1, 4 * C)), 1, C + int(rng.integers(1, 2 * C))]
                  + chunk_sizes(rng, odd_size_closed(rng, 3 * C, 5 * C), 2, C))
        streams.append((make_stream(rng, C, W, chunks), "a first chunk longer than the cache"))
    expect_streams(ex, streams)


def check_before_the_ring_fills(ex):
    """The first tokens, before every slot is written: empty slots (-1) are never attended to."""
    rng, streams = ex.rng, []
    for chunks in ([1] * 11, [3, 1, 5, 2], [7, 1, 1, 6, 1]):
        C = odd_size_closed(rng, sum(chunks) + 2, 3 * sum(chunks))
        W = int(rng.integers(sum(chunks), C + 1))
        streams.append((make_stream(rng, C, W, chunks), "a cache that is not yet full"))
    expect_streams(ex, streams)


def check_slots_outside_the_window(ex):
    """Ring slots outside every later query's window hold leftovers of any size (up to 1e30): no query sees them."""
    rng, misses = ex.rng, []
    for _ in range(2):
        C, D = odd_size_closed(rng, 12, 30), odd_size_closed(rng, 3, 17)
        W = int(rng.integers(2, C // 2))
        stale = C - W  # appended first, then W ordinary tokens: the ring is full, the leftovers out of reach
        q, k, v = (rng.standard_normal((W + 2 * C, D)) for _ in range(3))
        cache = ex.candidate.call("RingKVCache", C, D)
        cache.call("append", garbage(rng, (stale, D)), garbage(rng, (stale, D)))
        cache.call("append", k[:W], v[:W])
        want = oracle.sliding_window_attention(q, k, v, W)  # positions shifted by `stale`: out of every window
        chunks = chunk_sizes(rng, 2 * C, 2, C - W)
        case = {"capacity": C, "head_dim": D, "window": W, "leftovers": stale, "chunks": _short(chunks),
                "seed": ex.seed}
        misses.append(_leftover_miss(ex, cache, (q, k, v), want, W, stale, chunks, case))
    settle(ex, misses)


def _leftover_miss(ex, cache, qkv, want, W, stale, chunks, case) -> Miss | None:
    q, k, v = qkv
    start = W
    for T in chunks:
        part = slice(start, start + T)
        out = as_array(ex.candidate.call("windowed_attention_step", cache, q[part], k[part], v[part], W),
                       call="windowed_attention_step", shape=(T, q.shape[1]), kind="f", case=case)
        if off_by(out, want[part], qkv, diagnosis.magnitude(q, k)).any() or not np.isfinite(out).all():
            p = stale + start
            return Miss(len(chunks), f"after {stale} tokens of leftovers (values up to 1e30) and {W} ordinary ones, "
                                     f"the step for positions {p}..{p + T - 1} (window {W}) differs from "
                                     "sliding-window attention over the ordinary tokens: a slot outside the window "
                                     "was seen (a mask that adds a large negative number does not hide 1e12)", case,
                        kind="wrong" if np.isfinite(out).all() else "nan")
        start += T
    return None


def check_returns_arrays(ex):
    """window_mask returns a numpy bool array, windowed_attention_step a float64 one (float32 inputs too)."""
    rng, slips = ex.rng, []
    mask = ex.candidate.call("window_mask", np.arange(3, 6), np.arange(6), 2)
    slips.append(container_slip(mask, call="window_mask(...)", dtype=bool))
    for dtype in (np.float64, np.float32):
        cache = ex.candidate.call("RingKVCache", 5, 3)
        x = rng.standard_normal((2, 3)).astype(dtype)
        out = ex.candidate.call("windowed_attention_step", cache, x, x, x, 2)
        slips.append(container_slip(out, call=f"windowed_attention_step({np.dtype(dtype)} q, k, v)",
                                    dtype=np.float64))
    slips = [slip for slip in slips if slip]
    if slips:
        fail(slips[0] + ": the right values in another container or dtype", {"seed": ex.seed}, kind="hygiene")


def check_extreme_scores(ex):
    """Scaled scores anywhere in [-1e4, 1e4] (each query's near its own offset: rows far below 0, rows
    near 1e4; and rows whose keys lie thousands apart), float64 and float32 inputs: outputs within what the
    inputs' precision allows."""
    rng, streams = ex.rng, []
    for dtype in (np.float64, np.float32):
        C = odd_size_closed(rng, 9, 30)
        W = int(rng.integers(2, C - 1))
        chunks = chunk_sizes(rng, odd_size_closed(rng, 60, 90), 2, C - W + 1)
        N, D = sum(chunks), odd_size_closed(rng, 3, 40)
        offsets = rng.uniform(-1e4, 1e4, N)
        offsets[rng.permutation(N)[:4]] = [-1e4 + 2, 1e4 - 2, -800.0, 760.0]  # both ends, and past exp's range
        q, k = offset_scores(rng, offsets, N, D, dtype)
        s = Stream(C, W, chunks, q, k, rng.standard_normal((N, D)).astype(dtype))
        streams.append((s, f"scores anywhere in [-1e4, 1e4], {np.dtype(dtype)} inputs"))
    # keys thousands apart within each row: a chunk's later tokens and the keys past the window, which the
    # mask hides, often score far above the keys a query sees (a row's max taken before its mask underflows)
    C = odd_size_closed(rng, 9, 30)
    W = int(rng.integers(2, C - 1))
    chunks = chunk_sizes(rng, odd_size_closed(rng, 60, 90), 2, C - W + 1)
    N, D = sum(chunks), odd_size_closed(rng, 3, 40)
    q, k = offset_scores(rng, rng.uniform(-4e3, 4e3, N), N, D, key_offsets=rng.uniform(-5e3, 5e3, N))
    streams.append((Stream(C, W, chunks, q, k, rng.standard_normal((N, D))), "keys thousands apart in every row"))
    expect_streams(ex, streams)


def check_window_one(ex):
    """window = 1: each token attends to itself only, so its output is its own value."""
    rng = ex.rng
    alone = make_stream(rng, 1, 1, [1] * 23)
    C = odd_size_closed(rng, 3, 20)
    chunked = make_stream(rng, C, 1, chunk_sizes(rng, odd_size_closed(rng, 70, 90), 2, C))  # 3 laps at least
    expect_streams(ex, [(alone, "window 1 with capacity 1"), (chunked, "window 1, chunked")])


def check_window_equals_capacity(ex):
    """window = capacity, T = 1 decode: the oldest token in the ring is still visible."""
    rng = ex.rng
    C = odd_size_closed(rng, 6, 25)
    expect_streams(ex, [(make_stream(rng, C, C, [1] * odd_size_closed(rng, 4 * C, 5 * C)), "window = capacity, T = 1")])


def check_step_leaves_tokens_appended(ex):
    """After each step, len(cache), its positions and its keys/values hold every token so far."""
    rng = ex.rng
    C = odd_size_closed(rng, 7, 30)
    W = int(rng.integers(1, C + 1))
    chunks = chunk_sizes(rng, odd_size_closed(rng, 3 * C, 4 * C), 2, max(2, C // 3))[:40]
    run_stream(ex, make_stream(rng, C, W, chunks), watch_state=True)


def _reuse_plan(rng, C) -> list[tuple[str, int]]:
    """(call, T) for a stream whose caller reuses its arrays: first a prefill of exactly the capacity
    (it lands in slot order), then chunks that end exactly at the end of a lap (T < C, C <= T < 2C,
    T >= 2C), ragged ones and T = 1, each once through a step and once through append."""
    plan, length = [("step", C)], C
    for n in rng.permutation(5):
        for call in rng.permutation(["step", "append"]):
            if n == 1 and length % C == 0 and C > 1:  # the rest of a lap needs one begun
                plan.append((str(call), 1))
                length += 1
            edge = -length % C  # tokens to the end of the lap
            T = [1, edge or C, edge + C, edge + 2 * C, int(rng.integers(2, 2 * C + 2))][n]
            plan.append((str(call), T))
            length += T
    return plan


def _reuse_miss(ex, held, C, W, plan) -> Miss | None:
    """Feed ``plan``'s chunks, each call's q, k, v held in the candidate's process and overwritten
    with the next values as soon as it returns; outputs and the cache must follow the tokens as they
    were passed. Then every array the caller holds must still be what it last wrote there."""
    rng, D = ex.rng, odd_size_closed(ex.rng, 2, 7)
    N = sum(T for _, T in plan)
    q, k, v = (rng.standard_normal((N, D)) for _ in range(3))
    want = oracle.sliding_window_attention(q, k, v, W)
    cache, ring = ex.candidate.call("RingKVCache", C, D), oracle.Ring(C, D)
    step, append = ex.candidate.windowed_attention_step, cache.append
    case = {"capacity": C, "head_dim": D, "window": W, "chunks": _short([T for _, T in plan]), "seed": ex.seed}
    boxes, start = [], 0
    for n, (call, T) in enumerate(plan):
        part = slice(start, start + T)
        said = (f"windowed_attention_step(cache, q, k, v, window={W}) for positions {start}..{start + T - 1}"
                if call == "step" else f"cache.append(k, v) of positions {start}..{start + T - 1}")
        if call == "step":
            out, box = held.call(step, cache, q[part], k[part], v[part], W)
            at = (1, 2, 3)
        else:
            out, box = held.call(append, k[part], v[part])
            at = (0, 1)
        reused = [rng.standard_normal((T, D)) for _ in at]  # the caller's next chunk, in the same arrays
        held.overwrite(box, at, reused)
        boxes.append((box, at, reused, said))
        ring.append(k[part], v[part])
        earlier = (f"after {said}, once the caller had written other values into the arrays it passed (as a "
                   "caller that reuses its buffers may)")
        if call == "step":
            got = as_array(out, call=said, shape=(T, D), kind="f", case=case)
            if off_by(got, want[part], (q, k, v), diagnosis.magnitude(q, k)).any() or not np.isfinite(got).all():
                return Miss(start, f"{said} differs from sliding-window attention over the tokens as they were "
                                   "passed, after the caller wrote other values into the arrays of earlier calls "
                                   "(as a caller that reuses its buffers may): the cache must keep its own copy "
                                   "of what it stores, never the caller's array", case)
        miss = _state_miss(cache, ring, case, earlier)
        if miss:
            miss.message += ": the cache must keep its own copy of what it stores, never the caller's array"
            return miss
        start += T
    for box, at, reused, said in boxes:  # size past any wrong answer's: a wrong answer is the graver
        if not held.still_holds(box, at, reused):
            return Miss(10**9 + N, f"an array the caller passed to {said} {ARGUMENT_CHANGED}", case, kind="hygiene")
    return None


def check_keeps_its_own_copy(ex):
    """The caller reuses its q, k, v arrays as soon as a step or an append returns (a prefill of exactly the
    capacity, chunks ending at a ring boundary, T = 1): the cache's later answers and contents do not change, and
    no later call writes into an array the caller passed."""
    rng, held, misses = ex.rng, Held(ex), []
    for C in (odd_size_closed(rng, 3, 17), 1):  # capacity 1: every chunk lands in slot order
        misses.append(_reuse_miss(ex, held, C, int(rng.integers(min(2, C), C + 1)), _reuse_plan(rng, C)))
    settle(ex, misses)


def check_long_positions(ex):
    """Positions past 2^16 and 2^31: a chunk of ~70K tokens through a small ring, and masks over
    positions in the billions and past 2^62; with a window past 2^62 too, where a failure is hygiene."""
    rng = ex.rng
    C = odd_size_closed(rng, 5, 30)
    settle(ex, [_append_stream(ex, C, 2, [odd_size_closed(rng, 2**16 + 1, 70_000), 1, C + 2])])
    cases = []
    for base in (2**16 + odd_size_closed(rng, 1, 999), 2**31 + odd_size_closed(rng, 1, 999),
                 2**62 + odd_size_closed(rng, 1, 999)):
        ring = _ring_positions(C + 3, C)  # a wrapped ring, moved far along
        k = np.where(ring >= 0, ring + base, -1)
        cases.append((np.sort(k)[-3:], k, int(rng.integers(1, C + 1))))
    _expect_masks(ex, cases, "positions past 2^16, 2^31 and 2^62")
    with past_int64("a key plus the window past int64"):  # the window limits nothing there
        _expect_masks(ex, [(cases[-1][0], cases[-1][1], base + 2)], "positions past 2^62, a window past 2^62",
                      passed=cases)


def check_numpy_integer_arguments(ex):
    """capacity, head_dim and window as numpy integers (int8 ones too, over positions past 127); positions
    given to window_mask as lists and small int arrays, with windows too wide for the arrays' dtype too."""
    rng = ex.rng
    C, D, W = odd_size_closed(rng, 7, 20), odd_size_closed(rng, 3, 9), 5
    tokens = [tuple(rng.standard_normal((T, D)) for _ in range(3)) for T in (3, 1, C + 2, 2)]
    _numpy_stream(ex, int, C, D, W, tokens)  # Python ints first: a wrong answer is said as such, not blamed on the type
    with other_argument_types("numpy integer sizes or list positions were rejected"):
        _numpy_stream(ex, np.int64, C, D, W, tokens)
        _expect_masks(ex, [([5, 6, 7], [0, 1, 2, 3, 4, 5, 6, 7, -1], 3)], "positions given as lists")
    _expect_masks(ex, [(np.array([5, 6, 7], np.int8), np.array([4, 5, 6, 7, -1], np.int16), np.int8(2)),
                       (np.array([300, 301], np.int16), np.array([299, 300, 301, -1], np.int32), 2)],
                  "positions given as int8, int16 and int32 arrays (where int64 works)")
    # a window is any int >= 1 whatever the positions' dtype: p - W or k + W in that dtype overflows
    _expect_masks(ex, [_narrow_wide(rng, dtype) for dtype in (np.int8, np.int16, np.int32)],
                  "positions given as int8, int16 and int32 arrays, with a window wider than their dtype holds")
    long = tokens + [tuple(rng.standard_normal((T, D)) for _ in range(3)) for T in (130, 1)]
    _numpy_stream(ex, np.int8, C, D, W, long)  # the window an int8, the positions past its top


def _narrow_wide(rng, dtype):
    """window_mask's arguments: positions of ``dtype`` near 0 and near its top (-1 among the keys), both sides
    in random order, and a window past that top (within int64): the rule there is plain causal."""
    top = int(np.iinfo(dtype).max)
    k = rng.permutation(np.array([-1, 0, 1, 2, top - 3, top - 2, top - 1, top], dtype))
    return rng.permutation(np.array([0, 2, top - 1, top], dtype)), k, int(rng.integers(top + 1, 2 * top))


def _numpy_stream(ex, as_int, C, D, W, tokens):
    """RingKVCache(C, D) fed ``tokens`` with window W, every int made by ``as_int``: the rule's outputs."""
    cache = ex.candidate.RingKVCache(as_int(C), as_int(D))
    ring = oracle.Ring(C, D)
    for q, k, v in tokens:
        T = len(q)
        out = ex.candidate.windowed_attention_step(cache, q, k, v, as_int(W))
        start = ring.length
        stored = np.concatenate([ring.positions, start + np.arange(T)])
        want = oracle.masked_attention(q, np.concatenate([ring.keys, k]), np.concatenate([ring.values, v]),
                                       oracle.window_mask(start + np.arange(T), stored, W))
        ring.append(k, v)
        said = "Python int sizes" if as_int is int else f"numpy {np.dtype(as_int)} sizes"
        got = as_array(out, call=f"windowed_attention_step with {said}", shape=(T, D), kind="f")
        if not close(got, want, (q, k, v), diagnosis.magnitude(q, k)):
            fail(f"windowed_attention_step(cache, q [{T}, {D}], k, v, window={W}) on RingKVCache({C}, {D}), "
                 f"with {said}, differs from the rule",
                 case={"capacity": C, "head_dim": D, "window": W, "seed": ex.seed},
                 kind="wrong" if np.isfinite(got).all() else "nan")


# -- invalid arguments -----------------------------------------------------------------------


def check_rejects_the_invalid_case_shown(ex):
    """The invalid call the public tests show raises ValueError (in a live grading too)."""
    x = np.zeros((1, 3))
    cache = ex.candidate.call("RingKVCache", 5, 3)
    expect_rejected(ex, ex.candidate.windowed_attention_step, cache, x, x, x, 6,
                    call="windowed_attention_step(RingKVCache(5, 3), x, x, x, 6)", diagnosis=INVALID,
                    why=SHOWN)


def check_rejects_invalid_arguments(ex):
    """Bad sizes (a capacity past int64 beside a bad head_dim too), windows (past int64 too) and shapes (any one
    array's shape that numpy would broadcast against the others' too) raise ValueError, on zero rows and empty
    position lists as on others, and a rejected call leaves the cache as it was."""
    for C, D in [(0, 4), (4, 0), (-3, 2), (2.5, 4), (2**64, 0)]:
        expect_rejected(ex, ex.candidate.RingKVCache, C, D, call=f"RingKVCache({C}, {D})", diagnosis=INVALID)
    q = np.arange(5, 8)
    for W in (0, -2, -2**63 - 1):  # an empty side leaves nothing to mask, yet the window is still wrong
        for q_pos, k_pos, what in [(q, np.arange(8), "3 queries, 8 keys"), ([], np.arange(8), "no queries (a list)"),
                                   (q, np.zeros(0, np.int64), "no keys"), ([], [], "two empty lists")]:
            expect_rejected(ex, ex.candidate.window_mask, q_pos, k_pos, W,
                            call=f"window_mask({what}, window={W})", diagnosis=INVALID)
    cache, _ = _full_ring(ex)
    snapshot = _Snapshot(len(cache), np.array(cache.positions), np.array(cache.keys), np.array(cache.values))
    for call, what in _bad_calls(ex, cache):
        expect_rejected(ex, call, call=what, diagnosis=INVALID)
        _unchanged(ex, cache, snapshot, what)


def check_steps_after_rejected_calls(ex):
    """After a full ring has refused every invalid append and step, steps of one token with window = capacity
    match sliding-window attention over the tokens it was given."""
    cache, x = _full_ring(ex)
    # an accepted invalid call may change the cache: rejects_invalid_arguments judges that, not this check
    if all_refused(_bad_calls(ex, cache)):
        _expect_steps_after(ex, cache, x)


def _expect_steps_after(ex, cache, x):
    """Four steps of one token on ``cache`` (keys x, values -x appended), window = capacity: the widest window
    sees every live slot a step can reach, so any slot, position or length a refusal changed shows."""
    C, (N, D) = RING[0], x.shape
    new = [ex.rng.standard_normal((4, D)) for _ in range(3)]
    s = Stream(C, C, [N, 1, 1, 1, 1], *(np.concatenate([a, b]) for a, b in zip((np.zeros_like(x), x, -x), new)))
    want = oracle.sliding_window_attention(s.q, s.k, s.v, C)
    for p in range(N, N + 4):
        call = f"windowed_attention_step(cache, q, k, v, window={C}) for position {p} after the rejected calls"
        out = ex.candidate.call("windowed_attention_step", cache, s.q[p:p + 1], s.k[p:p + 1], s.v[p:p + 1], C)
        got = as_array(out, call=call, shape=(1, D), kind="f", case=s.case(ex.seed))
        if s.wrong_rows(got, want[p:p + 1]).any():
            fail(f"RingKVCache({C}, {D}) fed {N} tokens by append, then every invalid append and step (each "
                 f"refused): {call} differs from sliding-window attention over the tokens given by up to "
                 f"{_differs(got, want[p:p + 1]).max():.3g}", s.case(ex.seed))


RING = (6, 4)  # capacity, head_dim of the cache the invalid calls are made on


def _full_ring(ex):
    """(cache, x): RingKVCache(6, 4) given keys x and values -x of 8 tokens by append: a full ring, every slot
    live, so a write made before a refusal shows."""
    C, D = RING
    cache = ex.candidate.call("RingKVCache", C, D)
    x = ex.rng.standard_normal((C + 2, D))
    cache.call("append", x, -x)
    return cache, x


def _bad_calls(ex, cache) -> list:
    """(call, what) of every invalid append and step on ``cache`` (RING's sizes): each must raise ValueError and
    change nothing."""
    (C, D), r = RING, ex.rng.standard_normal
    step = partial(ex.candidate.windowed_attention_step, cache)
    calls = [(partial(cache.append, k, v), f"cache.append with {what}") for k, v, what in _bad_appends(r, D)]
    calls += [(partial(step, q, k, v, W), f"windowed_attention_step with {what}")
              for q, k, v, W, what in _bad_steps(r, C, D)]
    return calls + [(partial(step if name == "windowed_attention_step" else cache.append, *args), call)
                    for name, args, call in _broadcast_misfits(ex.rng, D)]


def _broadcast_misfits(rng, D):
    """(function, arguments, call): a step's q, k or v, or append's k or v, in turn given a shape numpy would
    still broadcast against the others' [T, head_dim] (``checking.misfit_calls``: a row count of 1, a 1-D
    array, a leading axis of 1): each must be refused, whichever array it is."""
    T = int(rng.integers(2, 6))
    rows = [rng.standard_normal((T, D)) for _ in range(3)]
    yield from misfit_calls("windowed_attention_step", ["q", "k", "v"], [("T", "D")] * 3, rows,
                            lambda a: (*a, 2))
    yield from misfit_calls("cache.append", ["k", "v"], [("T", "D")] * 2, rows[:2], tuple)


def _bad_appends(r, D):
    """(k, v, what) for append: wrong columns (of k, v or v alone), rows that differ, 1-D arrays, each with
    rows and with zero rows too (nothing to write is no reason to skip the checks)."""
    z = np.zeros
    return [(r((2, D + 1)), r((2, D + 1)), "k and v of shape [2, head_dim + 1]"),
            (r((2, D)), r((2, D + 1)), "k [2, D] and v alone of head_dim + 1 columns"),
            (r((2, D)), r((3, D)), "k [2, D] and v [3, D]"),
            (r((3, D)), r((1, D)), "k [3, D] and v [1, D] (which numpy would broadcast)"),
            (r(D), r(D), "1-D k and v"),
            (z((0, D + 1)), z((0, D + 1)), "k and v of zero rows and head_dim + 1 columns"),
            (z((0, D)), z((0, D + 3)), "k [0, D] and v [0, D + 3]"),
            (z((0, D)), r((2, D)), "k [0, D] and v [2, D]"),
            (r((2, D)), z((0, D)), "k [2, D] and v [0, D]"),
            (z(0), z(0), "1-D empty k and v")]


def _bad_steps(r, C, D):
    """(q, k, v, window, what) for a step: bad windows (past int64 too), shapes that differ (k or v alone of
    another width too), each with rows and with T = 0 too (an empty step is validated like any other)."""
    z = np.zeros
    steps = [(r((2, D)), r((2, D)), r((2, D)), 0, "window 0"),
             (r((2, D)), r((2, D)), r((2, D)), C + 1, f"window {C + 1} > capacity {C}"),
             (r((2, D)), r((2, D)), r((2, D)), -2**63 - 1, "window -2^63 - 1 (past int64)"),
             (r((2, D)), r((2, D)), r((2, D)), 2**64, f"window 2^64 > capacity {C} (past int64)"),
             (r((2, D)), r((3, D)), r((3, D)), 2, "q [2, D] with k, v [3, D]"),
             (r((2, D)), r((2, D)), r((1, D)), 2, "v [1, D] with q, k [2, D] (which numpy would broadcast)"),
             (r((2, D + 2)), r((2, D + 2)), r((2, D + 2)), 2, "head_dim + 2 columns"),
             (r((2, D)), r((2, D + 1)), r((2, D)), 2, "k alone of head_dim + 1 columns"),
             (r((2, D)), r((2, D)), r((2, D + 1)), 2, "v alone of head_dim + 1 columns")]
    empty = [(z((0, D)), z((0, D)), z((0, D)), W, f"T = 0 and window {W}") for W in (0, C + 1, -2**63 - 1)]
    empty += [(z((0, D + 2)), z((0, D + 2)), z((0, D + 2)), 2, "T = 0 of head_dim + 2 columns"),
              (z((0, D)), z((0, D + 1)), z((0, D + 1)), 2, "q [0, D] with k, v [0, head_dim + 1]"),
              (z((0, D)), r((2, D)), r((2, D)), 2, "q [0, D] with k, v [2, D]"),
              (z(0), z(0), z(0), 2, "1-D empty q, k, v")]
    return steps + empty


class _Snapshot(NamedTuple):
    """What a refused call must leave as it was."""
    length: int
    positions: np.ndarray
    keys: np.ndarray
    values: np.ndarray


def _unchanged(ex, cache, before: _Snapshot, call):
    """The cache as ``before`` had it: a refused call leaves it exactly (keys and values in the live slots)."""
    length, positions = len(cache), np.asarray(cache.positions)
    if length != before.length or not np.array_equal(positions, before.positions):
        fail(f"{call} raised ValueError but changed the cache first: len {length} (before: {before.length}), "
             f"positions {_short(positions)} (before: {_short(before.positions)})", kind="hygiene")
    live = before.positions >= 0
    for name in ("keys", "values"):
        now, then = np.asarray(getattr(cache, name)), getattr(before, name)
        if now.shape != then.shape or not np.array_equal(now[live], then[live]):
            fail(f"{call} raised ValueError but changed the cache first: cache.{name} of live slots differ "
                 "from before the call", kind="hygiene")


def integer_edges():
    """window_mask calls whose positions reach the top of int8, int16 and int32 (an empty slot's
    -1 among them), for the general integer-type check."""
    return [("window_mask", (np.arange(top - 3, top + 1), np.array([-1, *range(top - 6, top + 1)]), window), {})
            for top, window in [(127, 5), (32767, 6), (2**31 - 1, 4)]]
