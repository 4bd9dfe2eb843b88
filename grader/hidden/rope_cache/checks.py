"""Hidden checks for rope_cache. Each ``check_*`` is one stable check id (without the prefix).

A script is a list of steps fed to a fresh candidate cache: plain steps continue one sequence,
tree steps score drafts after it. After every step the outputs are compared with RoPE attention
over the whole sequence computed from scratch (for a draft: over the cache plus its branch),
and the cache's length, stored keys and values with the sequence's own tokens, each key rotated
once at its position. A check tries all its scripts, reports the smallest failing one, and
names a mistake only when replaying that mistake reproduces every failing script.

One sentence, one property (CONTRACT section 1 and rope_cache's section -> check id):

| sentence | check |
|---|---|
| rotate-half formula, theta_i = p * base ** (-2 i / D); positions unsorted | rope_values, rope_relative_invariance |
| ... the cache's base on every path: plain steps, chunks, trees, float32, numpy sizes, reused | every script check |
| buffers (other_bases: 500000, 1e6, 10, a random float beside the default) | |
| as large as memory allows: steps, prefills ending exactly at 64 .. 1024 tokens | prefill_then_decode, random_chunks |
| odd D, negative positions, base <= 1, bad parents or shapes (T = 0 too): ValueError | rejects_invalid_arguments |
| ... changing nothing: later steps answer as if none had been made | steps_after_rejected_calls |
| cache.base kept; keys and values [len, H, D] | fresh_cache |
| a plain step: positions len .. len + T - 1, rotated once, appended; bottom-right causal | prefill_then_decode, |
| | one_token_at_a_time, random_chunks |
| cached keys never rotated again; stored keys are part of the answer | every script (keys compared after every step), |
| | decode_step_memory |
| parents: drafts at len + depth(i), see the cache, ancestors, itself; nothing appended | tree_after_prefill |
| ... parents of any signed dtype: int8 ones with depths past 127 | tree_after_prefill |
| T = 0 returns [0, H, D], changes nothing | one_token_at_a_time, random_chunks |
| float32 or float64 inputs; outputs float64 or the inputs' dtype | random_chunks, rope_values, returns_arrays |
| precision follows the inputs (float32 angles at 1e5, or from positions past 2^24, are wrong) | rope_values |
| ... float64 steps after float32 ones (accepted or refused) keep float64 | random_chunks, steps_after_rejected_calls |
| lists for positions and parents; numpy integers for ints | rope_values, tree_after_prefill, numpy_integer_arguments |
| right values in another container: hygiene | returns_arrays |
| arguments unchanged, results the caller's; calls in any order | (the toolkit's ownership and call-order probes) |
| ... the cache keeps its own copy: a caller reusing q, k, v, parents changes nothing | keeps_its_own_copy |
| scores anywhere in [-1e4, 1e4]; float32 inputs; hidden keys scoring far above the seen | extreme_scores |
| plain steps and trees in any order | steps_and_trees_interleaved |

Sentences no check here holds as such: "keys and values may be properties" (a freedom). Trees
thousands deep are chains only (tree_after_prefill): the oracle decodes every other tree branch by branch.
"""
from dataclasses import dataclass, replace
from functools import cached_property, partial

import numpy as np

from grader.checking import (
    Miss,
    all_refused,
    as_array,
    chunk_sizes,
    container_slip,
    expect_rejected,
    fail,
    in_usual_types,
    measure,
    odd_size,
    other_argument_types,
    settle,
)
from grader.held import ARGUMENT_CHANGED, Held
from grader.stateful import shrink

from . import diagnosis, oracle
from .diagnosis import Seen, Step

INVALID = "accepts_invalid_arguments"  # the diagnosis for an invalid call that raised no ValueError

# ---- shapes ------------------------------------------------------------------------------------



def _head_dim(rng, lo=6, hi=40) -> int:
    """An even head dimension that is not a power of two."""
    while True:
        D = 2 * int(rng.integers(lo // 2, hi // 2))
        if D & (D - 1):
            return D


def _heads(rng) -> int:
    return int(rng.choice([1, 3, 5, 7]))


def _tokens(rng, T, H, D, dtype=np.float64) -> np.ndarray:
    return rng.standard_normal((T, H, D)).astype(dtype)


def other_bases(rng, n) -> list[float]:
    """``n`` bases other than the default, in a drawn order: 500000.0 and 1e6 (Llama 3, long contexts), 10.0 and
    a random float, so that a path that drops the cache's base (or rounds it to an int) is judged on every one."""
    drawn, order = [500000.0, 1e6, 10.0, round(float(rng.uniform(2.0, 2e5)), 3) + 0.5], rng.permutation(4)
    return [drawn[order[i % 4]] for i in range(n)]


def random_tree(rng, T, roots=None) -> list[int]:
    """Parents of T drafts in topological order; ``roots`` drafts (at least one) hang off the cache."""
    roots = roots or int(rng.integers(1, max(2, T // 3) + 1))
    return [-1 if i < roots else int(rng.integers(-1 if rng.random() < 0.2 else 0, i)) for i in range(T)]


# ---- scripts -----------------------------------------------------------------------------------

@dataclass
class Script:
    """Steps for a fresh RopeKVCache(H, D, base); ``numpy_sizes`` passes H and D as np.int64."""
    H: int
    D: int
    base: float
    steps: list
    label: str
    numpy_sizes: bool = False
    exact_float32: bool = False  # its float32 steps hold what float64 holds exactly: see tol_at

    @cached_property
    def tol(self) -> float:
        """Section 1's tolerance for every output, key and value of the script (oracle.tolerance)."""
        return self._tolerance([a for s in self.steps for a in (s.q, s.k, s.v) if len(a)])

    def tol_at(self, n: int) -> float:
        """The tolerance of step n's outputs and of the cache after it: the script's, or with ``exact_float32``
        (float32 steps whose keys are zero or at position 0, so that rotating and storing them is exact)
        that of step n's own inputs: a float64 step after float32 ones is judged at float64 precision."""
        step = self.steps[n - 1]
        return self._tolerance([a for a in (step.q, step.k, step.v) if len(a)]) if self.exact_float32 else self.tol

    def _tolerance(self, arrays) -> float:
        """oracle.tolerance at the precision of ``arrays``, for the angles, values and scores of the whole script."""
        plain = sum(len(s.q) for s in self.steps if s.parents is None)
        angle = plain + max((len(s.q) for s in self.steps if s.parents is not None), default=0)
        every = [a for s in self.steps for a in (s.q, s.k, s.v) if len(a)]
        if not every:
            return oracle.tolerance((), 1.0, 1.0)
        norm = [max(float(np.linalg.norm(getattr(s, a), axis=-1).max(initial=0)) for s in self.steps) for a in "qk"]
        scale = max(float(np.abs(a).max()) for a in every)
        return oracle.tolerance(arrays, angle, scale, norm[0] * norm[1] / np.sqrt(self.D))

    def case(self, seed, upto=None) -> dict:
        steps = self.steps[:upto]
        shown = [len(s.q) if s.parents is None else f"tree{[int(p) for p in s.parents]}" for s in steps]
        return {"num_heads": self.H, "head_dim": self.D, "base": self.base, "script": self.label,
                "steps": shown if len(shown) <= 12 else shown[:12] + [f"... {len(shown)} steps"], "seed": seed}


def plain_steps(rng, chunks, H, D, dtype=np.float64) -> list[Step]:
    return [Step(*(_tokens(rng, T, H, D, dtype) for _ in range(3))) for T in chunks]


def tree_step(rng, parents, H, D, as_array=False, dtype=None, floats=np.float64) -> Step:
    """A tree of drafts (q, k, v of ``floats``); ``as_array``: parents as a numpy array of ``dtype``, or of a
    signed dtype drawn from int8 .. int64."""
    T = len(parents)
    dtype = dtype or (rng.choice([np.int8, np.int16, np.int32, np.int64]) if as_array else None)
    return Step(*(_tokens(rng, T, H, D, floats) for _ in range(3)), np.array(parents, dtype) if as_array else parents)


def expected(script: Script) -> list[Seen]:
    """The oracle's answer after each step of ``script``."""
    plain = [s for s in script.steps if s.parents is None]
    q, k, v = (np.concatenate([getattr(s, a).astype(np.float64) for s in plain] or
                              [np.zeros((0, script.H, script.D))]) for a in "qkv")
    N = len(q)
    every = oracle.sequence_attention(q, k, v, script.base, np.arange(N)) if N else q
    keys = oracle.rotate(k, np.arange(N), script.base)
    want, cached = [], 0
    for s in script.steps:
        T = len(s.q)
        if s.parents is None:
            out, cached = every[cached:cached + T], cached + T
        else:
            out = oracle.tree_attention(k[:cached], v[:cached], s.q, s.k, s.v, list(s.parents), script.base)
        want.append(Seen(out, cached, keys[:cached], v[:cached]))
    return want


def _first(diff: np.ndarray, tol: float) -> tuple:
    """(row, head) of the first error above ``tol`` in an error array [T, H, D] (NaN counts as one)."""
    over = np.nan_to_num(diff, nan=np.inf).max(axis=-1) > tol
    return tuple(int(i) for i in np.argwhere(over)[0])


def _err(got, want) -> np.ndarray:
    return np.abs(np.asarray(got, np.float64) - want)


def _describe(step: Step, cached: int) -> str:
    T = len(step.q)
    if step.parents is None:
        return f"T = {T} after {cached} cached"
    parents = [int(p) for p in step.parents]
    if T > 12:  # a chain thousands deep
        parents = f"[{', '.join(map(str, parents[:8]))}, ..., {parents[-1]}]"
    return f"a tree of {T} drafts with parents {parents} after {cached} cached"


def _output_message(step: Step, n, cached, got, want, tol) -> str:
    diff = _err(got, want)
    row, head = _first(diff, tol)
    worst = float(np.nan_to_num(diff, nan=np.inf).max())
    if step.parents is None:
        what = "RoPE attention over the whole sequence"
        where = f"token {row} of the step, head {head}"
    else:
        what = "decoding that draft's own branch after the cache"
        where = f"draft {row}, head {head}"
    return (f"step {n} ({_describe(step, cached)}) returned outputs that differ from {what} by up to "
            f"{worst:.3g} (first at {where})")


def _state_message(step: Step, n, cached, got: Seen, want: Seen, tol) -> str | None:
    after = f"after step {n} ({_describe(step, cached)})"
    if got.length != want.length:
        return f"len(cache) is {got.length} {after}; expected {want.length}"
    for name in ("keys", "values"):
        bad = (_err(getattr(got, name), getattr(want, name)) > tol).any(axis=(1, 2))
        if bad.any():
            p = int(np.flatnonzero(bad)[0])
            rule = "rotated once, at that position" if name == "keys" else "as given (values are not rotated)"
            return (f"cache.{name}[{p}] {after} is not the {name[:-1]} of position {p} {rule}; "
                    f"{int(bad.sum())} of {len(bad)} stored {name} differ")
    return None


def _step(ex, cache, step: Step, call: str):
    """The step's answer, judged as :func:`checking.in_usual_types` says: parents as a list or numpy
    integer scalars refused by type, where an int64 array is answered, is a slip."""
    if step.parents is None:
        return ex.candidate.call("rope_attention_step", cache, step.q, step.k, step.v)
    given = partial(ex.candidate.call, "rope_attention_step", cache, step.q, step.k, step.v, parents=step.parents)
    usual = partial(ex.candidate.call, "rope_attention_step", cache, step.q, step.k, step.v,
                    parents=np.asarray([int(p) for p in step.parents], np.int64))
    return in_usual_types(given, usual, sent=(step.parents,),
                          what=f"{call} with parents as {type(step.parents).__name__}")


def run_script(ex, script: Script, held: Held | None = None) -> Miss | None:
    """Feed ``script`` to a fresh candidate cache, checking every step; a Miss at the first wrong one.
    With ``held``, every step's arrays are the caller's own, rewritten with other values as soon as it returns."""
    want = expected(script)
    H, D = (np.int64(script.H), np.int64(script.D)) if script.numpy_sizes else (script.H, script.D)
    cache = ex.candidate.call("RopeKVCache", H, D, script.base)
    got, cached, boxes = [], 0, []
    for n, (step, w) in enumerate(zip(script.steps, want), start=1):
        case, tol = script.case(ex.seed, n), script.tol_at(n)
        call = f"rope_attention_step(cache, q, k, v{'' if step.parents is None else ', parents'}) at step {n}"
        out = _step(ex, cache, step, call) if held is None else _held_step(ex, held, cache, step, boxes)
        out = as_array(out, call=call, shape=step.q.shape, kind="f", case=case)
        length = len(cache)
        keys, values = (as_array(getattr(cache, name), call=f"cache.{name} after step {n}",
                                 shape=(length, script.H, script.D), kind="f", case=case)
                        for name in ("keys", "values"))
        got.append(Seen(out, length, keys, values))
        prefix = f"RopeKVCache({script.H}, {script.D}, base={script.base:g}) fed {script.label}: "
        if (_err(out, w.out) > tol).any() or not np.isfinite(out).all():
            kind = "nan" if np.isnan(out).any() else "wrong"
            message = prefix + _output_message(step, n, cached, out, w.out, tol)
        else:
            message = _state_message(step, n, cached, got[-1], w, tol)
            message, kind = (prefix + message, "corrupt") if message else (None, None)
        if message:
            found = diagnosis.explaining_script(got, script.steps, script.H, script.D, script.base, tol)
            return Miss(sum(len(s.q) for s in script.steps[:n]) * script.H * script.D,
                        message + (OWN_COPY if held else ""), case, kind, found)
        cached = w.length
    return _written_into(boxes, script)


OWN_COPY = (", once the caller had written other values into the arrays it passed to every earlier call (as a "
            "caller that reuses its buffers may): the cache must keep its own copy of what it stores, never the "
            "caller's array")


def _held_step(ex, held, cache, step: Step, boxes: list):
    """The step made on arrays the caller owns, which it rewrites with other values (other tokens, other parents)
    as soon as the call returns; (box, indexes, values written) kept in ``boxes``."""
    args = (cache, step.q, step.k, step.v) + (() if step.parents is None else (step.parents,))
    out, box = held.call(ex.candidate.rope_attention_step, *args)
    lent = [box.lent[i] for i in box.arrays]
    written = [ex.rng.standard_normal(a.shape).astype(a.dtype) if a.dtype.kind == "f" else
               np.full(a.shape, -1, a.dtype) for a in lent]  # parents: every draft a root
    held.overwrite(box, box.arrays, written)
    boxes.append((box, box.arrays, written, len(boxes) + 1))
    return out


def _written_into(boxes, script) -> Miss | None:
    """A Miss when a later call wrote into an array the caller passed to an earlier one (after every wrong answer)."""
    for box, at, written, n in boxes:
        if not Held.still_holds(box, at, written):
            return Miss(10**9, f"an array the caller passed to rope_attention_step at step {n} of {script.label} "
                               f"{ARGUMENT_CHANGED}", {"script": script.label}, kind="hygiene")
    return None


def _expect_scripts(ex, scripts):
    settle(ex, [run_script(ex, s) for s in scripts])


# ---- rope on its own ---------------------------------------------------------------------------

def _rope_cases(rng):
    """(x, positions as passed, base): D = 2, D not a power of two, odd heads, unsorted and large
    positions (past 2^16 and 10^5; with float32 x, odd ones past 2^24 up to 2^40, which no float32
    holds: angles from positions in x's dtype turn by another position's angle), a list of positions,
    an int base, float32 (at another base too), T = 0. Positions in int16 and int32 arrays; numpy integer scalars are
    check_numpy_integer_arguments' and the general integer-type check's, which blame the type only
    where Python ints were answered."""
    T, (other,) = odd_size(rng, 5, 40), other_bases(rng, 1)  # float32 at another base too
    return [
        (_tokens(rng, 1, 1, 2), [1], 10000.0),
        (_tokens(rng, T, 3, 2), rng.permutation(T + 7)[:T], 10000.0),
        (_tokens(rng, T, _heads(rng), _head_dim(rng)), rng.integers(0, 2000, T), 10000.0),
        (_tokens(rng, T, 5, _head_dim(rng)), rng.integers(60_000, 140_000, T).tolist(), 10000.0),
        (_tokens(rng, 9, 1, _head_dim(rng, 40, 140)), rng.choice([0, 1, 100_000, 65_537, 32_769], 9), 500000.0),
        (_tokens(rng, T, 7, _head_dim(rng)), rng.integers(0, 300, T), 10),
        (_tokens(rng, T, 3, _head_dim(rng), np.float32), rng.integers(0, 1000, T).astype(np.int16), other),
        (_tokens(rng, T, 3, _head_dim(rng), np.float32), rng.integers(60_000, 140_000, T).astype(np.int32), 10000.0),
        (_tokens(rng, 5, 1, 2, np.float32), 2**24 + 2 * rng.permutation(5) + 1, 10000.0),  # odd: no float32 holds them
        (_tokens(rng, T, 3, _head_dim(rng), np.float32), 2 * rng.integers(2**23, 2**39, T) + 1, 10000.0),
        (_tokens(rng, 0, 3, _head_dim(rng)), np.zeros(0, np.int64), 10000.0),
    ]


def check_rope_values(ex):
    """rope matches the rotate-half formula: D = 2, D not a power of two, odd head counts, unsorted, large positions
    (float32 inputs at positions past 2^24 too)."""
    misses = []
    for x, positions, base in _rope_cases(ex.rng):
        p = np.asarray(positions, np.int64)
        call = f"rope(x {x.dtype} {list(x.shape)}, positions {type(positions).__name__} [{len(p)}], base={base!r})"
        case = {"shape": list(x.shape), "dtype": str(x.dtype), "base": float(base),
                "positions": p[:8].tolist() + (["..."] if len(p) > 8 else []), "seed": ex.seed}
        usual = partial(ex.candidate.rope, x, p, float(base))
        given = partial(ex.candidate.rope, x, positions, base)
        answer = in_usual_types(given, usual, sent=(positions,), what=call)
        got = as_array(answer, call=call, shape=x.shape, kind="f", case=case)
        want = oracle.rotate(x, p, float(base))
        tol = oracle.tolerance((x,), p.max(initial=0), float(np.abs(x).max(initial=1)))
        diff = _err(got, want)
        if (diff > tol).any() or not np.isfinite(got).all():
            t, h = _first(diff, tol)
            d = int(np.argmax(np.nan_to_num(diff[t, h], nan=np.inf)))
            message = (f"{call}: row {t} (position {p[t]}), head {h}, dimension {d} is {float(got[t, h, d]):.6g}, "
                       f"expected {want[t, h, d]:.6g}")
            misses.append(Miss(x.size, message, case, "nan" if np.isnan(got).any() else "wrong",
                               diagnosis.explaining_rope(got, x, p, float(base), tol)))
    settle(ex, misses)


def check_rope_relative_invariance(ex):
    """Shifting every position by the same amount leaves every query-key score unchanged."""
    rng = ex.rng
    H, D = _heads(rng), _head_dim(rng)
    T = odd_size(rng, 5, 30)
    q, k = _tokens(rng, T, H, D), _tokens(rng, T, H, D)
    q_pos, k_pos = rng.integers(0, 500, T), rng.integers(0, 500, T)
    scores = {}
    for shift in (0, 1, odd_size(rng, 1000, 5000), 70_001):
        case = {"T": T, "num_heads": H, "head_dim": D, "shift": shift, "seed": ex.seed}
        rq, rk = (as_array(ex.candidate.rope(x, p), call=f"rope(x [{T}, {H}, {D}], positions shifted by {shift})",
                           shape=x.shape, kind="f", case=case).astype(np.float64)
                  for x, p in ((q, q_pos + shift), (k, k_pos + shift)))
        scores[shift] = np.einsum("thd,shd->hts", rq, rk)  # [H, T, T]
    unshifted = scores[0]
    for shift, s in scores.items():
        diff = np.abs(s - unshifted)
        bound = float(np.linalg.norm(q, axis=-1).max() * np.linalg.norm(k, axis=-1).max())  # |q . k| <= bound
        if (diff > oracle.tolerance((q, k), 500 + shift, bound)).any() or not np.isfinite(s).all():
            h, i, j = (int(x) for x in np.unravel_index(np.argmax(np.nan_to_num(diff, nan=np.inf)), diff.shape))
            fail(f"rope: with every position shifted by {shift}, the score of query {i} (position "
                 f"{q_pos[i]} -> {q_pos[i] + shift}) with key {j} (position {k_pos[j]} -> {k_pos[j] + shift}), "
                 f"head {h}, changed from {unshifted[h, i, j]:.6g} to {s[h, i, j]:.6g}; a score must depend only "
                 "on the distance between the two positions",
                 {"T": T, "num_heads": H, "head_dim": D, "shift": shift, "seed": ex.seed})


# ---- the cache ---------------------------------------------------------------------------------

def check_fresh_cache(ex):
    """A new cache is empty, keeps its base, and its keys and values have shape [0, H, D]."""
    rng = ex.rng
    for H, D, base in [(1, 2, 10000.0), (_heads(rng), _head_dim(rng), 500000.0), (_heads(rng), _head_dim(rng), 50)]:
        call = f"RopeKVCache({H!r}, {D!r}, {base!r})"
        case = {"num_heads": int(H), "head_dim": int(D), "base": float(base)}
        cache = ex.candidate.call("RopeKVCache", H, D, base)
        if len(cache) != 0:
            fail(f"len({call}) is {len(cache)}; expected 0", case, kind="corrupt")
        for name in ("keys", "values"):
            as_array(getattr(cache, name), call=f"{call}.{name}", shape=(0, int(H), int(D)), kind="f", case=case)
        kept = cache.base
        if not isinstance(kept, (int, float, np.number)) or float(kept) != float(base):
            fail(f"{call}.base is {kept!r}; expected {float(base)!r}", case)


def check_prefill_then_decode(ex):
    """A prefill, then one token at a time: every output and every stored key and value, after every step; prefills
    of exactly two of 128, 256, 512 and 1024 tokens (where answers page or grow their storage), a step after each
    (random_chunks' steps end at every one of them, from a prefill of exactly 64)."""
    rng = ex.rng
    scripts = []
    for prompt, base in [(odd_size(rng, 20, 60), 10000.0), (1, 10000.0), (odd_size(rng, 60, 120), 500000.0)]:
        H, D = _heads(rng), _head_dim(rng)
        steps = plain_steps(rng, [prompt] + [1] * odd_size(rng, 20, 40), H, D)
        label = f"a prefill of {prompt} token{'s' * (prompt > 1)}, then decode steps of T = 1"
        scripts.append(Script(H, D, base, steps, label))
    for prompt in sorted(rng.choice(POWERS[1:], 2, replace=False).tolist()):  # one head, a small D: cheap
        D = _head_dim(rng, 6, 14)
        steps = plain_steps(rng, [prompt, int(rng.choice([1, odd_size(rng, 2, 9)]))], 1, D)
        scripts.append(Script(1, D, 10000.0, steps, f"a prefill of exactly {prompt} tokens, then one more step"))
    _expect_scripts(ex, scripts)


POWERS = (64, 128, 256, 512, 1024)  # lengths where answers page or grow storage: steps end exactly there


def _on_boundaries(rng) -> Script:
    """From a prefill of exactly 64, steps that end exactly at 128 (a step of T = 1), 256, 512 and 1024 (chunks,
    or T = 1), each boundary followed by a step starting there and one of them by a tree of drafts: a last page
    or buffer that is exactly full."""
    H, D = 1, _head_dim(rng, 6, 14)  # one head, a small D: 1024 tokens stay cheap for the oracle
    chunks, tree_at = [POWERS[0]], int(rng.choice(POWERS[1:]))
    for low, high in zip(POWERS, POWERS[1:]):
        last = 1 if high == 128 or rng.random() < 0.3 else int(rng.integers(2, 40))
        chunks += chunk_sizes(rng, high - low - last, 40, 250, p_one=0.1) + [last]  # few steps: 1024 tokens
    steps, length = [], 0
    for T in chunks:
        steps += plain_steps(rng, [T], H, D)
        length += T
        if length == tree_at:
            steps.append(tree_step(rng, random_tree(rng, 5), H, D))
    return Script(H, D, *other_bases(rng, 1), steps, "steps ending exactly at 64, 128, 256, 512 and 1024 tokens")


def check_one_token_at_a_time(ex):
    """From an empty cache, one token per step (D = 2 too, T = 0 first; the default base and another): outputs, keys
    and values after every step."""
    rng = ex.rng
    scripts = [Script(H, D, base, plain_steps(rng, [0] + [1] * odd_size(rng, 25, 50), H, D),
                      "an empty step, then one token per step")
               for H, D, base in [(_heads(rng), 2, 10000.0), (_heads(rng), _head_dim(rng), *other_bases(rng, 1))]]
    _expect_scripts(ex, scripts)


def check_random_chunks(ex):
    """Chunks of random sizes (T = 0, 1 and more, float32 inputs too): outputs and the cache after every step;
    float64 chunks after and between float32 ones (the first and larger ones) in one cache, judged at float64;
    steps ending exactly at 64, 128, 256, 512 and 1024 tokens."""
    rng = ex.rng
    scripts = []
    for dtype, base in [(np.float64, 10000.0), (np.float64, 1e6), (np.float32, *other_bases(rng, 1))]:
        H, D = _heads(rng), _head_dim(rng)
        chunks = chunk_sizes(rng, odd_size(rng, 80, 160), 2, 17)
        chunks.insert(len(chunks) // 2, 0)  # T = 0 changes nothing
        script = Script(H, D, base, plain_steps(rng, chunks, H, D, dtype), f"random chunks ({dtype.__name__})")
        scripts.append(script)
    _expect_scripts(ex, scripts + [_mixed_dtypes(rng), _on_boundaries(rng)])


def _mixed_dtypes(rng) -> Script:
    """float32 calls first (T = 0, then one token at position 0), then float64 and float32 chunks in turn, each
    float32 one longer than the cache (it makes any storage grow). Storage kept in the dtype of the call that made
    it rounds the float64 keys: float32 keys are zero past position 0, so rotating and storing them is exact and
    every float64 step is judged at float64 precision."""
    H, D = _heads(rng), _head_dim(rng, 6, 20)
    steps = plain_steps(rng, [0, 1], H, D, np.float32)
    for _ in range(4):
        steps += plain_steps(rng, [int(rng.integers(1, 6))], H, D)
        (wide,) = plain_steps(rng, [sum(len(s.q) for s in steps) + int(rng.integers(1, 4))], H, D, np.float32)
        steps.append(replace(wide, k=np.zeros_like(wide.k)))
    steps += plain_steps(rng, [int(rng.integers(1, 6))], H, D)
    return Script(H, D, *other_bases(rng, 1), steps, "float32 steps first (T = 0, 1), then float64 and float32 "
                  "chunks in turn (float32 keys zero past position 0)", exact_float32=True)


def _masked_outweigh_the_seen(rng, base) -> Script:
    """A prefill whose rows see scores near -1e4 while the keys hidden from them score near +1e4,
    then two sibling drafts, one seeing only 0 and -1e4 while its sibling scores +1e4: adding a
    finite "large negative" such as -1e4 to hidden scores lets them back in. Inputs are built from
    the rotated vectors wanted (rotated back by their positions)."""
    H, D, T = _heads(rng), _head_dim(rng, 6, 20), odd_size(rng, 5, 12)
    basis = np.linalg.qr(rng.standard_normal((H, D, 2)))[0]  # per head, two orthonormal directions
    e, f = basis[..., 0], basis[..., 1]  # [H, D]
    top = 1e4 * np.sqrt(D)  # a query this long scores +-1e4 against a unit key along its direction
    ramp = np.linspace(-1.0, 1.0, T)[:, None, None]  # key t scores 1e4 * ramp[t]: row t sees only lower ones
    prefill = Step(oracle.rotate(np.broadcast_to(top * e, (T, H, D)), -np.arange(T), base),
                   oracle.rotate(ramp * e, -np.arange(T), base), _tokens(rng, T, H, D))
    at = np.full(2, T)  # both roots sit at position T
    drafts = Step(oracle.rotate(np.broadcast_to(top * f, (2, H, D)), -at, base),
                  oracle.rotate(np.stack([-f, f]), -at, base), _tokens(rng, 2, H, D), [-1, -1])
    return Script(H, D, base, [prefill, drafts], "hidden keys scoring 2e4 above every seen one (a prefill, "
                  "then two sibling drafts)")


def check_extreme_scores(ex):
    """Scaled scores up to 1e4 in size, float64 and float32 inputs, chunks and a tree (bases other than the default),
    within the inputs' precision; hidden keys scoring 2e4 above every key a row sees."""
    rng, scripts = ex.rng, []
    bases = other_bases(rng, 3)
    scripts.append(_masked_outweigh_the_seen(rng, bases[2]))
    for dtype, base in zip((np.float64, np.float32), bases[:2]):
        H, D = _heads(rng), _head_dim(rng, 6, 20)
        steps = plain_steps(rng, chunk_sizes(rng, odd_size(rng, 30, 60), 2, 9), H, D, dtype)
        steps.append(tree_step(rng, random_tree(rng, 6), H, D))
        top = max(float(np.linalg.norm(s.q, axis=-1).max()) for s in steps) * max(
            float(np.linalg.norm(s.k, axis=-1).max()) for s in steps) / np.sqrt(D)
        scale = 10.0 ** rng.uniform(2, 4) / top  # scores up to 1e2 .. 1e4 in size
        steps = [Step((s.q * scale).astype(dtype), s.k.astype(dtype), s.v.astype(dtype), s.parents) for s in steps]
        scripts.append(Script(H, D, base, steps, f"scores up to 1e4 in size ({np.dtype(dtype)})"))
    _expect_scripts(ex, scripts)


LONG_CHAIN = 1_200  # drafts in one chain: deeper than Python's default recursion limit (1,000)


def check_tree_after_prefill(ex):
    """Trees of drafts after a prefill (chains, one thousands deep, one 129 deep in int8 parents, several roots,
    bushy, empty; bases other than the default): each draft's output, the cache kept."""
    rng = ex.rng
    bases = other_bases(rng, 4)  # the drafts' angles come from the cache's base, as a plain step's do
    H, D = _heads(rng), _head_dim(rng)
    P = odd_size(rng, 10, 40)
    chain = list(range(-1, 5))
    trees = [chain, random_tree(rng, odd_size(rng, 5, 14)), random_tree(rng, 9, roots=3), [-1], [],
             [-1, 0, 0, 1, 1, 2, 2, 3], [-1, -1, 1, 2, 3, 4]]
    steps = plain_steps(rng, [P], H, D)
    for n, parents in enumerate(trees):
        steps.append(tree_step(rng, parents, H, D, as_array=n % 2 == 1))
        if n == 3:
            steps += plain_steps(rng, [3, 1], H, D)  # the sequence goes on between trees
    scripts = [Script(H, D, bases[0], steps, f"a prefill of {P} tokens, then trees of drafts")]
    H2 = _heads(rng)
    scripts.append(Script(H2, 2, bases[1], plain_steps(rng, [7, 1], H2, 2) + [tree_step(rng, [-1, 0, 0, 2, -1], H2, 2)],
                          "a prefill of 7 tokens, a step of 1, then a tree (D = 2)"))
    # int8 parents up to 127, positions 124..252: past int8's top after 4 drafts (len + depth) and depth 128 itself
    deep = tree_step(rng, list(range(-1, 128)), H2, 2, as_array=True, dtype=np.int8)
    scripts.append(Script(H2, 2, bases[2], plain_steps(rng, [124], H2, 2) + [deep],
                          "a prefill of 124 tokens, then a chain of 129 drafts with int8 parents (D = 2)"))
    long = tree_step(rng, list(range(-1, LONG_CHAIN - 1)), 1, 2)  # section 1: recursion depth is no limit
    scripts.append(Script(1, 2, bases[3], plain_steps(rng, [5], 1, 2) + [long],
                          f"a prefill of 5 tokens, then a chain of {LONG_CHAIN:,} drafts"))
    _expect_scripts(ex, scripts)


# ---- random sequences of steps and trees (grader.stateful) ---------------------------------------


def _random_steps(rng, H, D, count, dtype=np.float64) -> list[Step]:
    """Plain steps of every size (T = 0, 1, a few, a long chunk) and trees of every shape, interleaved."""
    steps = []
    for _ in range(count):
        if rng.random() < 0.35:
            T = int(rng.integers(1, 9))
            shape = rng.choice(["chain", "bushy", "random"])
            parents = (list(range(-1, T - 1)) if shape == "chain" else
                       [-1] + [int(rng.integers(0, max(1, i // 2 + 1))) for i in range(1, T)] if shape == "bushy" else
                       random_tree(rng, T))
            steps.append(tree_step(rng, parents, H, D, as_array=rng.random() < 0.5, floats=dtype))
        else:
            T = int(rng.choice([0, 1, 1, 2, 3, int(rng.integers(4, 12)), int(rng.integers(12, 30))]))
            steps += plain_steps(rng, [T], H, D, dtype)
    return steps


def _playable(steps) -> list[Step]:
    """A tree needs a cached token to hang from: trees before the first plain token are left out."""
    out, cached = [], 0
    for step in steps:
        if step.parents is None or cached:
            out.append(step)
            cached += len(step.q) if step.parents is None else 0
    return out


def check_steps_and_trees_interleaved(ex):
    """Random sequences of plain steps (T = 0, 1, many) and trees of drafts, interleaved (a base other than the
    default), checked after every call."""
    rng = ex.rng
    H, D, (base,) = _heads(rng), _head_dim(rng, 6, 20), other_bases(rng, 1)
    sequences = [_playable(_random_steps(rng, H, D, 16)) for _ in range(3)]

    def play(steps):
        return run_script(ex, Script(H, D, base, _playable(steps), "random steps and trees (shrunk)"))

    failing = [(steps, miss) for steps in sequences if (miss := play(steps)) is not None]
    if failing:  # the shrunk one is the smallest case shown; a mistake is named only when it fits all
        settle(ex, [shrink(*failing[0], play)[1]] + [miss for _, miss in failing])


def check_keeps_its_own_copy(ex):
    """The caller reuses its q, k, v and parents arrays as soon as a step returns (a prefill, T = 1, chunks and
    trees, float64 and float32, bases other than the default): the later outputs and the stored keys and values do
    not change, and no later call writes into an array the caller passed."""
    rng, held, scripts = ex.rng, Held(ex), []
    bases = other_bases(rng, 2)
    for dtype, first, base in ((np.float64, odd_size(rng, 5, 20), bases[0]), (np.float32, 1, bases[1])):
        H, D = _heads(rng), _head_dim(rng, 6, 20)
        steps = plain_steps(rng, [first], H, D, dtype) + _playable(_random_steps(rng, H, D, 10, dtype))
        steps = [s if s.parents is None else replace(s, parents=np.asarray([int(p) for p in s.parents]))
                 for s in steps]  # as arrays: the caller can rewrite those
        label = (f"a first chunk of {first}, then steps and trees ({np.dtype(dtype)}), the caller writing other "
                 "values into its arrays after every call")
        scripts.append(Script(H, D, base, steps, label))  # a first chunk may become storage
    settle(ex, [run_script(ex, s, held) for s in scripts])


# ---- invalid arguments ---------------------------------------------------------------------------

def check_numpy_integer_arguments(ex):
    """num_heads, head_dim and parents given as numpy integers (a base other than the default): the same answers as
    Python ints."""
    rng = ex.rng
    H, D, (base,) = _heads(rng), _head_dim(rng), other_bases(rng, 1)
    parents = random_tree(rng, odd_size(rng, 4, 9), roots=2)
    steps = plain_steps(rng, [odd_size(rng, 3, 12), 1], H, D) + [tree_step(rng, parents, H, D)]
    label = "a prefill, a step of 1, then a tree of drafts"
    _expect_scripts(ex, [Script(H, D, base, steps, label)])  # a wrong answer is said as such, not blamed on the type
    steps[-1] = replace(steps[-1], parents=[np.int64(p) for p in parents])
    with other_argument_types("RopeKVCache(np.int64, np.int64) or parents as numpy integers were rejected"):
        _expect_scripts(ex, [Script(H, D, base, steps, label + " (numpy integers)", numpy_sizes=True)])


def check_rejects_invalid_arguments(ex):
    """Odd D or D = 0, negative positions, base <= 1, bad parents (as many as the drafts, none past int64) and
    mismatched shapes raise ValueError, changing nothing, for T = 0 as for any T (a fresh cache's float32 first call
    included)."""
    rng, c = ex.rng, ex.candidate
    x = _tokens(rng, 3, 2, 6)
    for args, what in [((x[..., :5], [0, 1, 2]), "an odd head dimension 5"),
                       ((x, [0, -1, 2]), "a negative position"),
                       ((x, [0, 1]), "2 positions for 3 rows"),
                       ((x, [4]), "1 position for 3 rows (numpy would broadcast it)"),
                       ((x, np.array([[0], [1], [2]])), "positions of shape [3, 1]"),
                       ((x, [0, 1, 2], 1.0), "base = 1"),
                       ((x, [0, 1, 2], 0.5), "base = 0.5"),
                       ((x, [0, -2**63 - 1, 2]), "a position -2^63 - 1 (negative, past int64)"),
                       ((x[:0, :, :5], []), "0 rows of an odd head dimension 5"),
                       ((x[:0], [0]), "1 position for 0 rows"),
                       ((x[..., :0], [0, 1, 2]), "a head dimension of 0")]:
        expect_rejected(ex, c.rope, *args, call=f"rope with {what}", diagnosis=INVALID)
    for args, what in [((2, 7), "head_dim 7"), ((0, 4), "num_heads 0"), ((2, 0), "head_dim 0"),
                       ((2, 4, 1.0), "base 1.0"), ((2, 4, -3.0), "base -3.0"),
                       ((2**64, 7), "head_dim 7, num_heads 2^64")]:
        expect_rejected(ex, c.RopeKVCache, *args, call=f"RopeKVCache{args} ({what})", diagnosis=INVALID)
    cache = c.call("RopeKVCache", *SIZES)
    call, what = _refused_first_call(ex, cache)
    expect_rejected(ex, call, call=what, diagnosis=INVALID)
    _unchanged(cache, (0, np.zeros((0, *SIZES)), np.zeros((0, *SIZES))), what)
    first = _tokens(rng, 4, *SIZES)
    c.call("rope_attention_step", cache, first, first, first)
    before = (len(cache), np.array(cache.keys), np.array(cache.values))
    for call, what in _bad_calls(ex, cache):
        expect_rejected(ex, call, call=what, diagnosis=INVALID)
        _unchanged(cache, before, what)


def check_steps_after_rejected_calls(ex):
    """A cache refuses a float32 first call, takes a few tokens, refuses every invalid step, then takes one more
    step: its output and the stored keys match RoPE attention over the tokens given."""
    rng, H, D = ex.rng, *SIZES
    cache = ex.candidate.call("RopeKVCache", H, D)
    if not all_refused([_refused_first_call(ex, cache)]):
        return  # an accepted invalid call may change the cache: rejects_invalid_arguments judges that
    first = _tokens(rng, 4, H, D)
    ex.candidate.call("rope_attention_step", cache, first, first, first)
    if not all_refused(_bad_calls(ex, cache)):
        return
    script = Script(H, D, 10000.0, [Step(first, first, first), Step(*(_tokens(rng, 2, H, D) for _ in "qkv"))],
                    "two steps")
    miss = _after_rejections(ex, cache, script)
    if miss is not None:
        fail(miss, script.case(ex.seed))


SIZES = (3, 4)  # num_heads, head_dim of the cache the invalid steps are made on


def _refused_first_call(ex, cache) -> tuple:
    """(call, what): a fresh cache's first call in float32 with too few heads. Storage made in its dtype before the
    refusal would round every later key."""
    wrong = _tokens(ex.rng, 2, 2, SIZES[1], np.float32)
    what = "rope_attention_step with float32 q, k, v of 2 heads for a cache of 3, its first call"
    return partial(ex.candidate.rope_attention_step, cache, wrong, wrong, wrong), what


def _bad_calls(ex, cache) -> list:
    """(call, what) of every invalid step on ``cache`` (SIZES, holding tokens): each must raise ValueError and
    change nothing."""
    H, D = SIZES

    def t(T, h=H, d=D):
        return _tokens(ex.rng, T, h, d)
    bad_steps = [((t(2), t(3), t(3)), {}, "q [2, H, D] with k, v [3, H, D]"),
                 *_one_odd_out(t),
                 ((t(2, 2), t(2, 2), t(2, 2)), {}, "2 heads for a cache of 3"),
                 ((t(2, d=6), t(2, d=6), t(2, d=6)), {}, "head dimension 6 for a cache of 4"),
                 ((t(2)[:, 0], t(2)[:, 0], t(2)[:, 0]), {}, "2-D q, k, v"),
                 ((t(3), t(3), t(3)), {"parents": [-1, 1, 0]}, "parents [-1, 1, 0] (a draft its own parent)"),
                 ((t(3), t(3), t(3)), {"parents": [-1, 0, 2]}, "parents [-1, 0, 2]"),
                 ((t(3), t(3), t(3)), {"parents": [-1, -2, 0]}, "parents [-1, -2, 0]"),
                 ((t(3), t(3), t(3)), {"parents": [-1, 0]}, "2 parents for 3 drafts"),
                 ((t(3), t(3), t(3)), {"parents": [-1]}, "1 parent for 3 drafts (numpy would broadcast it)"),
                 ((t(3), t(3), t(3)), {"parents": []}, "no parents for 3 drafts"),
                 ((t(3), t(3), t(3)), {"parents": [-1, 0, 1, 2]}, "4 parents for 3 drafts"),
                 ((t(3), t(3), t(3)), {"parents": [-1, -2**63 - 1, 0]}, "parents[1] = -2^63 - 1 (past int64)"),
                 ((t(3), t(3), t(3)), {"parents": [-1, 0, 2**63]}, "parents[2] = 2^63 (past int64)"),
                 *_empty_steps(t)]
    step = partial(ex.candidate.rope_attention_step, cache)
    return [(partial(step, *args, **kwargs), f"rope_attention_step with {what}") for args, kwargs, what in bad_steps]


def _after_rejections(ex, cache, script) -> str | None:
    """The second step of ``script`` on a cache that made its first, then rejected every bad step."""
    step, want = script.steps[1], expected(script)[1]
    call = "rope_attention_step(cache, q, k, v) after the rejected calls"
    out = as_array(_step(ex, cache, step, call), call=call, shape=step.q.shape, kind="f", case=script.case(ex.seed))
    keys = as_array(cache.keys, call="cache.keys", shape=(len(cache), script.H, script.D), kind="f")
    if (_err(out, want.out) > script.tol).any() or keys.shape != want.keys.shape or (
            _err(keys, want.keys) > script.tol).any():
        return (f"{call} differs from rope attention over the 6 tokens at positions 0..5, within float64 precision: "
                "the rejected calls left something changed (a position counter moved, or storage made in a refused "
                "float32 call's dtype, before the arguments were checked?)")
    return None


def _empty_steps(t):
    """Steps of T = 0 (allowed) whose shapes or parents are wrong: nothing to compute is no reason to skip a check."""
    return [((t(0, 2), t(0, 2), t(0, 2)), {}, "q, k, v [0, 2, D] for a cache of 3 heads"),
            ((t(0, d=6), t(0, d=6), t(0, d=6)), {}, "q, k, v [0, H, 6] for a cache of head dimension 4"),
            ((t(0), t(0, 2), t(0)), {}, "k alone [0, 2, D] (q, v [0, H, D])"),
            ((t(0), t(0), t(0, d=6)), {}, "v alone [0, H, 6] (q, k [0, H, D])"),
            ((t(0), t(2), t(2)), {}, "q [0, H, D] with k, v [2, H, D]"),
            ((t(0)[:, 0], t(0)[:, 0], t(0)[:, 0]), {}, "2-D q, k, v of 0 rows"),
            ((t(0), t(0), t(0)), {"parents": [-1, 0]}, "2 parents for 0 drafts")]


def _one_odd_out(t):
    """Steps where one of q, k, v alone (q too: a q of 1 row beside k, v of 2 is what numpy broadcasts) has
    another length, head count or head dimension: each argument is checked before anything is appended."""
    odd = [((3,), {}, "3 rows"), ((1,), {}, "1 row"), ((2,), {"h": 2}, "2 heads"), ((2,), {"h": 1}, "1 head"),
           ((2,), {"d": 6}, "head dimension 6")]  # a length or head count of 1 is what numpy broadcasts
    return [(tuple(t(*a, **kw) if n == i else t(2) for n in range(3)), {},
             f"{'qkv'[i]} alone of {what} (the others [2, H, D])") for i in range(3) for a, kw, what in odd]


def _unchanged(cache, before, call):
    length, keys, values = len(cache), np.asarray(cache.keys), np.asarray(cache.values)
    if length != before[0] or not (np.array_equal(keys, before[1]) and np.array_equal(values, before[2])):
        fail(f"{call} raised ValueError but changed the cache first: len {length} (before: {before[0]})",
             kind="hygiene")


# ---- efficiency ----------------------------------------------------------------------------------

def check_returns_arrays(ex):
    """rope and rope_attention_step return numpy float arrays: float64, or the inputs' dtype."""
    rng, slips = ex.rng, []
    for dtype in (np.float64, np.float32):
        x = _tokens(rng, 3, 2, 6, dtype)
        slips.append(_dtype_slip(ex.candidate.rope(x, [0, 5, 2]), f"rope({np.dtype(dtype)} x)", dtype))
        cache = ex.candidate.call("RopeKVCache", 2, 6)
        out = ex.candidate.call("rope_attention_step", cache, x, x, x)
        slips.append(_dtype_slip(out, f"rope_attention_step({np.dtype(dtype)} q, k, v)", dtype))
    slips = [slip for slip in slips if slip]
    if slips:
        fail(slips[0] + ": the right values in another container or dtype", {"seed": ex.seed}, kind="hygiene")


def _dtype_slip(value, call, dtype) -> str | None:
    """float64 is always right; the inputs' own dtype is too (the prompt allows keeping it)."""
    slips = [container_slip(value, call=call, dtype=d) for d in (np.float64, dtype)]
    return None if None in slips else slips[0]


def _typical_peak(ex, cache, H, D, T, parents, times) -> int | None:
    """Median peak bytes of ``times`` steps of T tokens (drafts when ``parents``) on ``cache``,
    measured through checking.measure (None when any step could not be measured)."""
    peaks = []
    for _ in range(times):
        x = _tokens(ex.rng, T, H, D)
        _, peak, _ = measure(ex, ex.candidate, "rope_attention_step", cache, x, x, x,
                             *([] if parents is None else [parents]), on_state=True)
        peaks.append(peak)
    return None if None in peaks else sorted(peaks)[times // 2]


def check_decode_step_memory(ex):
    """Steps over a cache at two lengths (T = 1, a short chunk, a tree): a step's allocation does not grow with
    the cache, nor come near the size of its keys."""
    rng = ex.rng
    # 16 to 20 heads: half a copy of the keys (8 to 10 rows of D a position) outgrows the per-position tables a
    # correct step may build (Hugging Face's rotary cos and sin of every position, with their angles: 3.5 rows
    # of D; a red team's 4 heads allowed only 2); D about 130: a copy of the keys (1,040 bytes a token and
    # head) outgrows a dozen [T, S] score temporaries of a T = 5 step (40 each). Both drawn: no constant
    # tells these steps from others.
    H, D, S = int(rng.integers(16, 21)), 2 * int(rng.integers(60, 71)), odd_size(rng, 500, 600)
    cache, fed = ex.candidate.call("RopeKVCache", H, D), 0
    kinds = [(1, None, "decode steps (T = 1)"), (5, None, "chunks of T = 5"), (4, [-1, 0, 0, 1], "trees of 4 drafts")]
    peaks = []  # per cache length: the typical peak of each kind of step
    for target in (S, 2 * S):
        for T in chunk_sizes(rng, target - fed, 200, 300, p_one=0):
            x = _tokens(rng, T, H, D)
            ex.candidate.call("rope_attention_step", cache, x, x, x)
        fed = len(cache)
        peaks.append([_typical_peak(ex, cache, H, D, T, parents, 3) for T, parents, _ in kinds])
    grown_keys = (fed - S) * H * D * 8  # the cached keys added between the two lengths
    keys = fed * H * D * 8  # the cached keys at the longer length: a copy of them, however padded
    for (T, parents, what), short, long in zip(kinds, *peaks):
        if short is None or long is None or (long - short < grown_keys // 2 and long < keys // 2):
            continue  # a per-step table of fixed size is no copy: only growth with the cache, or its size, is
        size = (f"{(long - short) / 2**20:.2f} MiB more over {fed:,} cached tokens than over {S:,}, as much as the "
                f"keys added ({grown_keys / 2**20:.2f} MiB)" if long - short >= grown_keys // 2 else
                f"{long / 2**20:.2f} MiB over {fed:,} cached tokens, as much as half their keys "
                f"({keys / 2**20:.2f} MiB in all)")
        ex.diagnose("cache_copied_each_step",
                    f"{what} allocated {size}: the cache is copied (or rotated anew) at every step instead of "
                    "being read where it lies")
        fail(f"{what} peaked at a median of {short / 2**20:.2f} MiB over {S:,} cached tokens and "
             f"{long / 2**20:.2f} MiB over {fed:,} (H = {H}, D = {D}): a step allocates as much as a copy or a "
             "re-rotation of the cache",
             {"num_heads": H, "head_dim": D, "cached": [S, fed], "T": T, "parents": parents, "seed": ex.seed},
             kind="efficiency")


def integer_edges():
    """rope calls whose positions reach the top of int8, int16 and int32, for the general integer-type check."""
    x = np.linspace(-1.0, 1.0, 4 * 2 * 8).reshape(4, 2, 8)
    return [("rope", (x, list(range(top - 3, top + 1))), {}) for top in (127, 32767, 2**31 - 1)]
