"""Known mistakes of rope_cache, as whole implementations to replay on the same inputs.

A check feeds the candidate a script of steps; when something goes wrong it replays the script
through each mistake below (and through pairs of them) and names a mistake only when the
replay gives the candidate's outputs, stored keys, values and lengths at every step up to the
failure. The sentences say where the mistake shows, with numbers from the failing script.
"""
import itertools
from dataclasses import dataclass, replace

import numpy as np

from . import oracle


@dataclass(frozen=True)
class Mistake:
    """One way of getting rope_cache wrong; the defaults are the right answer."""
    id: str = ""
    interleaved: bool = False  # pairs (2i, 2i + 1), GPT-J
    exponent: float = 2.0  # theta_i = p * base ** (-exponent * i / D)
    shift: int = 0  # a plain step's tokens at len + shift + t
    restart: bool = False  # a plain step's tokens at t, as if the sequence began again
    drafts_by_index: bool = False  # draft i at len + i
    rotate_values: bool = False
    rerotate_cache: bool = False  # each step turns the stored keys again at their positions, and stores them
    rerotate_on_read: bool = False  # each step turns a copy of the stored keys again before attending
    append_drafts: bool = False


MISTAKES = [
    Mistake("rotated_twice", rerotate_cache=True),
    Mistake("rotated_twice", rerotate_on_read=True),
    Mistake("interleaved_pairs", interleaved=True),
    Mistake("position_after_append", shift=1),
    Mistake("index_positions", drafts_by_index=True),
    Mistake("positions_restart_at_zero", restart=True),
    Mistake("angle_exponent_halved", exponent=1.0),
    Mistake("values_rotated", rotate_values=True),
    Mistake("drafts_appended", append_drafts=True),
]


def turn(x, positions, base, m: Mistake) -> np.ndarray:
    """x [T, H, D] rotated as mistake ``m`` rotates (the right way for the default Mistake)."""
    x = np.asarray(x, np.float64)
    D = x.shape[-1]
    idx = np.arange(D // 2)
    first, second = (2 * idx, 2 * idx + 1) if m.interleaved else (idx, idx + D // 2)
    angle = np.asarray(positions, np.float64)[:, None, None] * base ** (-m.exponent * idx / D)  # [T, 1, D/2]
    out = x.copy()
    out[..., first] = x[..., first] * np.cos(angle) - x[..., second] * np.sin(angle)
    out[..., second] = x[..., second] * np.cos(angle) + x[..., first] * np.sin(angle)
    return out


def depths(parents) -> np.ndarray:
    return np.array([len(oracle.branch(parents, i)) - 1 for i in range(len(parents))], np.int64)


def _sees(parents, T) -> np.ndarray:
    """[T, T]: which of the step's own tokens each sees (causal, or ancestors and itself)."""
    if parents is None:
        return np.tril(np.ones((T, T), bool))
    sees = np.zeros((T, T), bool)
    for i in range(T):
        sees[i, oracle.branch(parents, i)] = True
    return sees


@dataclass
class Step:
    """One call: q, k, v [T, H, D] and parents (None for a plain step)."""
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    parents: list | None = None

    def positions(self, cached: int, m: Mistake = Mistake()) -> np.ndarray:
        T = len(self.q)
        if self.parents is None:
            return np.arange(T) + (0 if m.restart else cached + m.shift)
        return cached + (np.arange(T) if m.drafts_by_index else depths(self.parents))


@dataclass
class Seen:
    """What one step gave: its outputs, then the cache's length, keys and values."""
    out: np.ndarray
    length: int
    keys: np.ndarray
    values: np.ndarray


def replay(steps: list[Step], H, D, base, m: Mistake) -> list[Seen]:
    """What an implementation with mistake ``m`` gives for each step, on a fresh cache."""
    keys, values, seen = np.zeros((0, H, D)), np.zeros((0, H, D)), []
    for step in steps:
        S, T = len(keys), len(step.q)
        if m.rerotate_cache:
            keys = turn(keys, np.arange(S), base, m)
        read = turn(keys, np.arange(S), base, m) if m.rerotate_on_read else keys
        pos = step.positions(S, m)
        k, v = turn(step.k, pos, base, m), (turn(step.v, pos, base, m) if m.rotate_values else step.v)
        visible = np.concatenate([np.ones((T, S), bool), _sees(step.parents, T)], axis=1)
        out = oracle.attention(turn(step.q, pos, base, m), np.concatenate([read, k]), np.concatenate([values, v]),
                               visible) if T else np.zeros((0, H, D))
        if step.parents is None or m.append_drafts:
            keys, values = np.concatenate([keys, k]), np.concatenate([values, v])
        seen.append(Seen(out, len(keys), keys, values))
    return seen


def same(a: Seen, b: Seen, tol: float) -> bool:
    return (a.length == b.length and a.out.shape == b.out.shape and a.keys.shape == b.keys.shape
            and np.allclose(a.out, b.out, rtol=0, atol=tol) and np.allclose(a.keys, b.keys, rtol=0, atol=tol)
            and np.allclose(a.values, b.values, rtol=0, atol=tol))


def _combined(pair) -> Mistake:
    a, b = pair
    return replace(a, **{f: getattr(b, f) for f in Mistake.__dataclass_fields__
                         if f != "id" and getattr(b, f) != getattr(Mistake(), f)})


def explaining_script(got: list[Seen], steps: list[Step], H, D, base, tol) -> list[tuple[str, str]]:
    """[(id, sentence)]: the mistake (or pair of mistakes) whose replay gives every step of ``got``."""
    def fits(m):
        return all(same(g, r, tol) for g, r in zip(got, replay(steps[:len(got)], H, D, base, m)))
    for m in MISTAKES:
        if fits(m):
            return [(m.id, sentence(m, got, steps, D, base))]
    for pair in itertools.combinations(MISTAKES, 2):
        if pair[0].id != pair[1].id and fits(_combined(pair)):
            return [(m.id, sentence(m, got, steps, D, base)) for m in pair]
    return []


# ---- sentences ------------------------------------------------------------------------------

def _plain_step(steps, before=None):
    """(number from 1, tokens cached before it, the step) of the last plain step with T > 0
    that is not the first one (where a position shift is visible), else of any plain step."""
    cached, found = 0, None
    for n, s in enumerate(steps[:before]):
        if s.parents is None and len(s.q):
            if found is None or cached > 0:
                found = (n + 1, cached, s)
            cached += len(s.q)
    return found


def _tree_step(steps):
    """(number, tokens cached before it, step, a draft whose index differs from its depth)."""
    cached = 0
    for n, s in enumerate(steps):
        if s.parents is not None:
            d = depths(s.parents)
            odd = np.flatnonzero(d != np.arange(len(d)))
            if odd.size:
                return n + 1, cached, s, int(odd[0])
        else:
            cached += len(s.q)
    return None


def sentence(m: Mistake, got: list[Seen], steps, D, base) -> str:
    n_steps, diagnosis_id = len(got), m.id
    if m.rerotate_on_read:
        p = min(12, got[-1].length - len(steps[n_steps - 1].q) - 1) if steps[n_steps - 1].parents is None \
            else min(12, got[-1].length - 1)
        return (f"at step {n_steps} the cached keys were rotated again before attending: the key cached at "
                f"position {p} was scored at the angle of position {2 * p}; a stored key is already rotated")
    if diagnosis_id == "rotated_twice":
        stored_at, cached = {}, 0  # position -> index of the step that stored it
        for n, s in enumerate(steps[:n_steps - 1]):
            if s.parents is None:
                stored_at.update((p, n) for p in range(cached, cached + len(s.q)))
                cached += len(s.q)
        p = min(12, cached - 1)
        times = n_steps - stored_at.get(p, 0)  # once when stored, once more at each later step
        return (f"the key cached at position {p} (stored at step {stored_at.get(p, 0) + 1}) was rotated again at "
                f"each later step: at step {n_steps} its angle is that of position {times * p}; a stored key is "
                "already rotated and must stay as it is")
    if diagnosis_id == "interleaved_pairs":
        return ("the rotation pairs dimensions (0, 1), (2, 3), ... (the interleaved layout of GPT-J and Meta's "
                "Llama code); rotate-half pairs dimension "
                f"i with i + D/2: (0, {D // 2}), (1, {D // 2 + 1}), ... for D = {D}")
    if diagnosis_id in ("position_after_append", "positions_restart_at_zero"):
        n, cached, s = _plain_step(steps, n_steps)
        T = len(s.q)
        start = cached + 1 if diagnosis_id == "position_after_append" else 0
        at = f"position {start}" if T == 1 else f"positions {start}..{start + T - 1}"
        return (f"step {n} ({T} new token{'s' if T > 1 else ''} after {cached} cached) rotated its tokens at "
                f"{at}, which is not where they sit in the sequence")
    if diagnosis_id == "index_positions":
        found = _tree_step(steps[:n_steps])
        if found is None:
            return "draft tokens were rotated at the cache length plus their index in the tree"
        n, cached, s, i = found
        depth = int(depths(s.parents)[i])
        return (f"at step {n}, draft {i} of the tree (parents {[int(p) for p in s.parents]}) was rotated at position "
                f"{cached + i}, the cache length plus its index; its branch puts it at {cached + depth}")
    if diagnosis_id == "angle_exponent_halved":
        i = min(1, D // 2 - 1)
        return (f"the angles are p * base ** (-i / D), not p * base ** (-2 i / D): with D = {D}, pair {i} turns by "
                f"{base ** (-i / D):.4g} rad per position instead of {base ** (-2 * i / D):.4g}")
    if diagnosis_id == "values_rotated":
        return "the values were rotated as well: only queries and keys carry positions; values are stored as given"
    if diagnosis_id == "drafts_appended":
        n, cached, s, _ = _tree_step(steps[:n_steps]) or (0, 0, steps[0], 0)
        return (f"after the tree of {len(s.q)} drafts at step {n} the cache grew from {cached} to "
                f"{cached + len(s.q)} tokens: drafts are scored, never stored")
    raise KeyError(diagnosis_id)


# ---- rope alone ---------------------------------------------------------------------------------

def explaining_rope(got, x, positions, base, tol) -> list[tuple[str, str]]:
    """[(id, sentence)] of the rotation mistakes that give ``got`` for rope(x, positions, base)."""
    D = x.shape[-1]
    found = []
    for m in MISTAKES:
        if (m.interleaved or m.exponent != 2.0) and np.allclose(got, turn(x, positions, base, m), rtol=0, atol=tol):
            found.append((m.id, sentence(m, [], [], D, base)))
    return found

