"""Known-wrong ways to read a paged cache, and the sentences that name them.

A *layout* is what paged_attention may use: per sequence its length and block table, and the
two pools. A variant reads it with up to three mistakes:

- ``reader``: "table" (right), "logical" (position p from block p // block_size, as if the
  sequence's blocks were the first ones) or "consecutive" (from the sequence's first block on);
- ``stale``: the slots past seq_len in the last block are attended: "offset", the queries count
  every slot of the table's blocks as keys (the offset taken from the slots, not from seq_len);
  "all", every query sees them besides its own causal keys (a mask built for the real tokens
  only, or slots hidden by adding -1e9, which a leftover of 1e12 outweighs: a query row may then
  also be the clean reading's);
- ``top_left``: the T queries placed at the sequence's first positions 0 .. T - 1 instead of its
  last T (a causal mask aligned top-left, PyTorch's ``is_causal``);
- the head mapping, inferred per query head: which kv head's keys and values explain it.

A variant explains a wrong output when every query head matches it with some kv head. A
mistake is named only when the fewest-mistake explanation is the same for every failing case.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from grader import checking

READERS = ("table", "logical", "consecutive")


@dataclass
class Layout:
    block_size: int
    key_pool: np.ndarray  # [num_blocks, block_size, Hkv, D]
    value_pool: np.ndarray
    tables: dict = field(default_factory=dict)  # seq_id -> int64 [blocks]
    lens: dict = field(default_factory=dict)  # seq_id -> int

    def gather(self, seq_id):
        """(keys, values) [L, Hkv, D] of a sequence, read through its block table."""
        p = np.arange(self.lens[seq_id])
        where = self.tables[seq_id][p // self.block_size], p % self.block_size
        return self.key_pool[where], self.value_pool[where]


@dataclass(frozen=True)
class Reading:
    reader: str
    stale: bool
    mapping: tuple  # kv head each query head read
    top_left: bool = False

    def mistakes(self, Hkv) -> frozenset:
        group = len(self.mapping) // Hkv
        named = {"physical_order_assumed"} if self.reader != "table" else set()
        if self.stale:
            named.add("stale_slots_visible")
        if self.top_left:
            named.add("top_left_alignment")
        if any(j != h // group for h, j in enumerate(self.mapping)):
            named.add("gqa_head_mapping")
        return frozenset(named)


def _blocks(layout, seq_id, reader, positions):
    table, bs = layout.tables[seq_id], layout.block_size
    logical = positions // bs
    blocks = {"table": lambda: table[np.minimum(logical, len(table) - 1)],
              "logical": lambda: logical,
              "consecutive": lambda: table[0] + logical}[reader]()
    return None if (blocks >= len(layout.key_pool)).any() else blocks


def per_kv_head(layout, seq_id, q, reader, stale, top_left=False, read=None):
    """[Hkv, T, Hq, D]: every query head's output had it read kv head j, or None when the
    reading leaves the pool. ``read``: :func:`scored`, or a memo of it."""
    T = q.shape[0]
    L = layout.lens[seq_id]
    n = len(layout.tables[seq_id]) * layout.block_size if stale else L
    if n == 0 or (stale == "all" and n == L):
        return None
    found = (read or scored)(layout, seq_id, q, reader, n)
    if found is None:
        return None
    scores, values = found
    positions = np.arange(n)
    first = 0 if top_left else (L if stale == "all" else n) - T
    visible = positions[None, :] <= (first + np.arange(T))[:, None]  # [T, n]
    if stale == "all":
        visible |= positions[None, :] >= L
    scores = np.where(visible[None, :, None, :], scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=3, keepdims=True))
    weights /= weights.sum(axis=3, keepdims=True)
    Hkv, _, Hq, _ = weights.shape
    return np.matmul(weights.reshape(Hkv, T * Hq, n), values.transpose(1, 0, 2)).reshape(Hkv, T, Hq, -1)


def scored(layout, seq_id, q, reader, n):
    """(scores [Hkv, T, Hq, n], values [n, Hkv, D]) of the sequence's first ``n`` slots as ``reader`` finds
    them, or None when that reading leaves the pool. Every reading of the same slots shares them."""
    positions = np.arange(n)
    blocks = _blocks(layout, seq_id, reader, positions)
    if blocks is None:
        return None
    bs = layout.block_size
    keys, values = layout.key_pool[blocks, positions % bs], layout.value_pool[blocks, positions % bs]
    T, Hq, D = q.shape
    scores = np.matmul(q.reshape(1, T * Hq, D), keys.transpose(1, 2, 0)) / math.sqrt(D)  # [Hkv, T * Hq, n]
    return scores.reshape(-1, T, Hq, n), values


def magnitude(layout, seq_id, q) -> float:
    """The largest |scaled score| of ``q`` against the sequence's own keys (section 1's m)."""
    keys, _ = layout.gather(seq_id)
    if not len(keys):
        return 1.0
    return float(np.abs(np.einsum("thd,ngd->thng", q.astype(np.float64), keys)).max() / math.sqrt(q.shape[2]))


def close(a, b, q=None, m: float = 1.0):
    """Section 1's rule for an output computed from ``q`` (its dtype) with scores up to ``m``."""
    return bool(np.isfinite(a).all() and checking.close(a, b, () if q is None else (q,), m))


def readings(layout, seq_id, q, got, m: float = 1.0) -> list[Reading]:
    """Every variant reading that explains the output ``got`` [T, Hq, D]."""
    Hq, Hkv = q.shape[1], layout.key_pool.shape[2]
    group = Hq // Hkv
    found = []
    outputs = {}  # each reading's outputs, computed once (the "all" readings compare with the clean ones too)
    memo = {}  # readings of the same slots share their scores

    def read(layout, seq_id, q, reader, n):
        if (reader, n) not in memo:
            memo[reader, n] = scored(layout, seq_id, q, reader, n)
        return memo[reader, n]

    for reader, stale, top_left in itertools.product(READERS, (False, "offset", "all"), (False, True)):
        outs = outputs[reader, stale, top_left] = per_kv_head(layout, seq_id, q, reader, stale, top_left, read)
        if outs is None:
            continue
        # stale slots seen only where their scores win (e.g. hidden by adding -1e9, which hides a
        # small leftover and not one of 1e12): each query row may also be the clean reading's
        clean = outputs[reader, False, top_left] if stale == "all" else None
        fit = _rows_fit(got, outs, q, m)  # [Hkv, T, Hq]
        if clean is not None:
            fit |= _rows_fit(got, clean, q, m)
        mapping = []
        for h in range(Hq):
            fits = [j for j in range(Hkv) if fit[j, :, h].all()]
            if not fits:
                break
            mapping.append(h // group if h // group in fits else fits[0])
        if clean is not None and len(mapping) == Hq and close(got, _mapped(clean, mapping), q, m):
            continue  # the clean reading alone explains it: no stale slot was seen
        if len(mapping) == Hq:
            found.append(Reading(reader, stale, tuple(mapping), top_left))
    return found


def _rows_fit(got, outs, q, m) -> np.ndarray:
    """[Hkv, T, Hq]: whether row got[t, h] is finite and :func:`close` to outs[j, t, h] (each row on its own)."""
    return np.isfinite(got).all(axis=-1) & checking.close_rows(got, outs, (q,), m)


def _mapped(outs, mapping) -> np.ndarray:
    """[T, Hq, D]: query head h's output as read from kv head mapping[h]."""
    return np.stack([outs[j][:, h] for h, j in enumerate(mapping)], axis=1)


@dataclass
class Failure:
    """A wrong paged_attention output, with what is needed to explain it."""
    layout: Layout
    seq_id: int
    q: np.ndarray
    got: np.ndarray
    want: np.ndarray
    after: str = ""  # the operation after which it was called, in a lifecycle
    case: dict | None = None  # what was tried, for the report

    @property
    def size(self):
        return self.q.size * self.layout.lens[self.seq_id]

    @property
    def magnitude(self) -> float:
        return magnitude(self.layout, self.seq_id, self.q)

    def right(self) -> bool:
        return close(self.got, self.want, self.q, self.magnitude)

    def off_by(self) -> np.ndarray:
        """[T, Hq, D]: True where the output misses beyond section 1's tolerance."""
        return checking.off_by(self.got, self.want, (self.q,), self.magnitude)


def explain(failures: list[Failure]) -> list[tuple[str, str]]:
    """[(diagnosis id, sentence)] for the fewest mistakes that explain every failure, or []
    when none does or two different explanations tie."""
    common = None
    per_failure = []
    for f in failures:
        found = readings(f.layout, f.seq_id, f.q, f.got, f.magnitude)
        kinds = {r.mistakes(f.layout.key_pool.shape[2]) for r in found} - {frozenset()}
        per_failure.append(found)
        common = kinds if common is None else common & kinds
    if not common:
        return []
    fewest = min(len(k) for k in common)
    best = [k for k in common if len(k) == fewest]
    if len(best) != 1:
        return []
    chosen = best[0]
    return [(m, _sentence(m, failures, per_failure, chosen)) for m in sorted(chosen)]


def _sentence(mistake, failures, per_failure, chosen):
    """The sentence for ``mistake`` from the smallest failure where it shows."""
    order = sorted(range(len(failures)), key=lambda i: failures[i].size)
    for i in order:
        f = failures[i]
        Hkv = f.layout.key_pool.shape[2]
        for r in per_failure[i]:
            if r.mistakes(Hkv) != chosen:
                continue
            text = SENTENCES[mistake](f, r)
            if text:
                return text
    return DEFAULT[mistake]


def _gqa(f, r):
    Hq, Hkv = f.q.shape[1], f.layout.key_pool.shape[2]
    group = Hq // Hkv
    wrong = [h for h, j in enumerate(r.mapping) if j != h // group]
    if not wrong:
        return None
    h, j = wrong[0], r.mapping[wrong[0]]
    how = f" ({h} % {Hkv})" if j == h % Hkv else ""
    return (f"query head {h} read kv head {j}{how}; with {Hq} query heads over {Hkv} kv heads "
            f"(groups of {group}) it reads kv head {h // group}")


def _physical(f, r):
    table, bs = f.layout.tables[f.seq_id], f.layout.block_size
    positions = np.arange(f.layout.lens[f.seq_id])
    read = _blocks(f.layout, f.seq_id, r.reader, positions)
    if read is None or r.reader == "table":
        return None
    right = table[positions // bs]
    differ = np.flatnonzero(read != right)
    if not differ.size:
        return None
    p = int(differ[0])
    how = f"p // block_size = {p} // {bs}" if r.reader == "logical" else f"its first block {table[0]} + {p} // {bs}"
    return (f"sequence {f.seq_id} read position {p} from block {read[p]} ({how}), but its block table "
            f"{short(table)} puts it in block {right[p]}: a sequence's blocks are not consecutive, "
            "every read goes through the table")


def _stale(f, r):
    L, bs = f.layout.lens[f.seq_id], f.layout.block_size
    n = len(f.layout.tables[f.seq_id]) * bs
    if not r.stale or n == L:
        return None
    return (f"sequence {f.seq_id} holds {L} token{'s' if L != 1 else ''}, but its queries also attended the "
            f"{n - L} slots after its last token in its last block (block {f.layout.tables[f.seq_id][-1]}, slots "
            f"{L % bs}..{bs - 1}), which are not its tokens (zeros in a fresh block, an old sequence's tokens "
            f"after a free): its last query saw {n} keys instead of {L}")


def _top_left(f, r):
    T, L = f.q.shape[0], f.layout.lens[f.seq_id]
    if not r.top_left or T == L:
        return None
    return (f"the {T} queries of sequence {f.seq_id} were placed at its first positions 0..{T - 1}, not at its "
            f"last {T} ({L - T}..{L - 1}): query 0 saw 1 key instead of {L - T + 1} (a top-left causal mask, "
            "as tril(ones(T, L)) or PyTorch's is_causal gives)")


SENTENCES = {"gqa_head_mapping": _gqa, "physical_order_assumed": _physical, "stale_slots_visible": _stale,
             "top_left_alignment": _top_left}
DEFAULT = {"gqa_head_mapping": "query heads read the wrong kv heads",
           "top_left_alignment": "the queries were aligned at the sequence's first positions, not its last",
           "physical_order_assumed": "positions were read from the wrong blocks, not through the block table",
           "stale_slots_visible": "slots past seq_len in the last block were attended"}


def short(a) -> str:
    a = [int(x) for x in a]
    return str(a) if len(a) <= 10 else f"[{', '.join(map(str, a[:10]))}, ...] ({len(a)} blocks)"


# -- the cache's own storage ----------------------------------------------------------------


def overwritten_by_sharer(layout, histories, mismatches):
    """The sentence when every stored token that differs from its sequence's history holds
    instead the token another live sequence wrote at the same position into a block both hold
    (an append without copy-on-write); else None."""
    sentence = None
    for seq_id, p in mismatches:
        block, slot = int(layout.tables[seq_id][p // layout.block_size]), p % layout.block_size
        stored = layout.key_pool[block, slot]
        writers = [t for t in histories.live() if t != seq_id and block in layout.tables[t]
                   and histories.length(t) > p and np.array_equal(histories.keys[t][p], stored)]
        if not writers:
            return None
        sentence = sentence or (
            f"sequence {writers[0]} appended its position {p} into block {block}, which it shares with "
            f"sequence {seq_id} (a fork gave them the same blocks): sequence {seq_id}'s own token at "
            f"position {p} was overwritten. An append into a block another sequence holds must copy it first")
    return sentence


def returned_shared_blocks(freed, tables_before, layout, got, expected):
    """The sentence when a free returned exactly the freed sequence's blocks that other
    sequences still hold; else None."""
    still_held = {int(b) for t in layout.tables.values() for b in t}
    shared = sorted(int(b) for b in tables_before[freed] if int(b) in still_held)
    if not shared or got - expected != len(shared):
        return None
    holder = next(s for s, t in layout.tables.items() if shared[0] in t)
    return (f"free({freed}) returned {checking.plural(len(shared), 'block')} that other sequences still hold (block "
            f"{shared[0]} is in sequence {holder}'s table): num_free_blocks() is {got}, expected {expected}; "
            "a shared block goes back to the pool only when its last holder is freed")
