"""Hidden checks for paged_kv_cache. Each ``check_*`` is one stable check id (without the prefix).

The cache is driven by random operation sequences (``grader.stateful``: add, append of every
size, fork, free, re-added ids, the pool running out) against the oracle's token histories;
after every operation every live sequence is read back through the fixed layout
(``block_table`` + the pools) and compared with its history, with ``seq_len`` and
``num_free_blocks``; paged_attention is compared with dense attention over the history. The
first failing sequence is shrunk (a bounded number of replays) and is the case shown.
Attention checks also run on a layout the grader builds and lends (shuffled tables, garbage up
to 1e30 in every slot no query may read, up to 1e300 beside float32 queries, scores up to 1e4), so
they show what paged_attention reads through the table and nothing else; the lent object has
seq_len, block_table, key_pool and value_pool and no other member (no block_size, no sizes). Values are judged with
section 1's precision rule (``checking.close``); a right value in another container is judged as
a value, and the container alone fails ``returns_arrays`` (hygiene).

One sentence, one property (CONTRACT section 1 and paged_kv_cache's section -> check id):

| sentence | check |
|---|---|
| token p lives at key_pool[table[p // bs], p % bs] | operation_sequences, single_sequence, long_sequence |
| each cache is its own: three of one size, operations interleaved, one made midway | caches_side_by_side |
| append writes seq_len .. seq_len + T - 1, blocks in any order | operation_sequences, single_sequence |
| too few free blocks: RuntimeError, nothing changed | out_of_blocks (every last-block state: own or |
| | shared, full or partly filled; exactly enough is taken), operation_sequences |
| fork shares blocks, copies nothing, cannot run out | fork_copies_nothing, operation_sequences |
| an append into a shared block copies it first (no append changes another sequence) | operation_sequences |
| the appending sequence gets the copy; every other holder keeps its table (and no operation | operation_sequences, |
| changes the table of a sequence it does not name, nor a full block's entry) | out_of_blocks, fork_copies_nothing |
| a full shared block is never copied | operation_sequences (block count, efficiency) |
| free returns a block when no other holder is left | operation_sequences |
| stale slots past seq_len hold any finite value, never attended | attention_extreme_scores |
| block_table returns the caller's own array (a copy, or a read-only view) | (the toolkit's ownership probes) |
| ids are ints; after free an id may be added again (a new sequence: nothing kept per id | operation_sequences |
| outlives free, in paged_attention too) | (every drawing: ids freed, added again or forked into, attended) |
| all four sizes >= 1, as large as memory allows (block sizes past 512, 1024, 4096) | attention_edges, single_sequence |
| as large as memory allows: a block held by 65537 sequences (a 16-bit count wraps to 1) | fork_copies_nothing |
| as large as memory allows: a pool past 2^16 blocks (block ids past a 16-bit table) | long_sequence |
| all four sizes >= 1; T = 0 changes nothing (no table, no free count) | rejects_invalid_arguments, |
| | out_of_blocks (every last-block state, the pool empty too), operation_sequences |
| paged_attention: last T positions, bottom-right, h // (Hq // Hkv), 1/sqrt(D) | attention_gqa_groups, attention_edges |
| paged_attention uses only seq_len, block_table and the pools | attention_* (on a lent layout) |
| unknown or reused ids, shapes, Hq % Hkv, T range: ValueError, nothing changed | rejects_invalid_arguments |
| a float size (2.5) is an invalid argument | rejects_invalid_arguments |
| numpy integers work wherever an int is asked for | numpy_integer_arguments |
| scores anywhere in [-1e4, 1e4]; garbage up to 1e30 in slots never read | attention_extreme_scores |
| (beside float32 queries: float64 values float32 cannot hold, up to 1e300) | attention_extreme_scores |
| float32 inputs; precision follows the inputs | single_sequence, operation_sequences, attention_extreme_scores |
| the right values in another container or dtype: hygiene | returns_arrays |
| a function leaves its arguments unchanged; results belong to the caller | (the toolkit's ownership probes) |
| the cache keeps its own copy: a caller reusing its k, v, q after a call changes nothing; | keeps_its_own_copy |
| no later call changes an argument | |

Sentences no check here holds as such: "a sequence's blocks are in general not consecutive" (a
freedom, not a duty); "storage can be inspected" (every check reads the pools).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import replace
from functools import partial

import numpy as np

from grader.checking import (
    CheckFailure,
    all_refused,
    as_array,
    container_slip,
    error_of,
    expect_array,
    expect_rejected,
    fail,
    garbage,
    odd_size_closed,
    other_argument_types,
    plural,
    summarize,
)
from grader.checking.drawn import seq_ids
from grader.held import ARGUMENT_CHANGED, Held  # calls whose arguments the caller then reuses
from grader.result import FAILURE_KINDS
from grader.sandbox import CandidateRaised, Lent
from grader.stateful import Op, describe_ops, shrink

from . import diagnosis, oracle
from .diagnosis import Failure, Layout

INVALID = "accepts_invalid_arguments"  # the diagnosis for an invalid call that raised no ValueError


def _int_array(value, call, shape, case):
    return as_array(value, call=call, shape=shape, kind="i", case=case).astype(np.int64)


def _float_array(value, call, shape, case):
    return as_array(value, call=call, shape=shape, kind="f", case=case)


def _tokens(T):
    return f"{T} token" if T == 1 else f"{T} tokens"


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class Run:
    """A candidate cache and the oracle's histories, driven by the same operations."""

    def __init__(self, ex, num_blocks, block_size, num_kv_heads, head_dim, group=1, diagnose=None, held=None):
        self.ex, self.rng = ex, ex.rng
        # held (keeps_its_own_copy): each append's k, v and each attention's q stay in the candidate's
        # process and the caller writes other values into them as soon as the call returns
        self.held, self.reused = held, []  # reused: (box, argument indexes, what the caller wrote, call)
        self.diagnose = diagnose or ex.diagnose  # a replayed sequence names mistakes only once it is shrunk
        self.sizes = (num_blocks, block_size, num_kv_heads, head_dim)
        self.num_q_heads = num_kv_heads * group
        self.model = oracle.Histories(block_size, num_kv_heads, head_dim)
        self.ops: list[str] = []
        self.failures: list[Failure] = []
        self.cache = ex.candidate.call("PagedKVCache", *self.sizes)
        self.layout = self.expect_state("for a new cache")

    @property
    def block_size(self):
        return self.sizes[1]

    def case(self):
        nb, bs, Hkv, D = self.sizes
        ops = self.ops if len(self.ops) <= 14 else [f"... {len(self.ops) - 12} earlier"] + self.ops[-12:]
        return {"num_blocks": int(nb), "block_size": int(bs), "num_kv_heads": int(Hkv), "head_dim": int(D),
                "query_heads": int(self.num_q_heads), "operations": "; ".join(ops), "seed": self.ex.seed}

    # -- operations, on both sides, each followed by a full comparison ----------------------

    def add(self, seq_id):
        before = self.layout
        self.cache.call("add_sequence", seq_id)
        self.model.add(seq_id)
        self._did(f"add_sequence({seq_id})", before, owner=seq_id)

    def append(self, seq_id, T, dtype=np.float64, rng=None):
        k, v = ((rng or self.rng).standard_normal((T, *self.sizes[2:])).astype(dtype) for _ in range(2))
        before = self.layout
        op = f"append({seq_id}, {_tokens(T)}{', float32' if dtype == np.float32 else ''})"
        if self.held is None:
            self.cache.call("append", seq_id, k, v)
        else:
            _, box = self.held.call(self.cache.append, seq_id, k, v)
            self._reuse(box, (1, 2), [k, v], op)
            op += " (then the caller wrote other values into its k and v)"
        self.model.append(seq_id, k.astype(np.float64), v.astype(np.float64))
        self._did(op, before, owner=seq_id)
        if T == 0:
            self.expect_nothing_changed(before)

    def expect_nothing_changed(self, before: Layout):
        """After an append of 0 tokens: every table as it was (no copy-on-write, no block taken)."""
        for s, table in before.tables.items():
            now = self.layout.tables.get(s)
            if now is None or not np.array_equal(now, table):
                fail(f"{self.ops[-1]} changed block_table({s}) from {diagnosis.short(table)} to "
                     f"{summarize(now)}: an append of 0 tokens changes nothing (not even the copy of a "
                     "shared last block: nothing is written)", self.case(), kind="corrupt")

    def fork(self, parent, child):
        before = self.layout
        self.cache.call("fork", parent, child)
        self.model.fork(parent, child)
        self._did(f"fork({parent}, {child})", before, owner=child)  # sharing itself: fork_copies_nothing

    def free(self, seq_id):
        before = self.layout
        self.cache.call("free", seq_id)
        self.model.free(seq_id)
        self._did(f"free({seq_id})", before, owner=seq_id, freed=seq_id, tables_before=dict(before.tables))

    def _did(self, op, before=None, owner=None, owner_full_blocks=True, **free_info):
        self.ops.append(op)
        self.layout = self.expect_state(f"after {op}", **free_info)
        if before is not None:
            self._expect_other_tables_kept(before, owner, owner_full_blocks)

    def _expect_other_tables_kept(self, before: Layout, owner, owner_full_blocks):
        """Every sequence the operation does not name keeps its table (copy-on-write gives the copy to the
        appending sequence), and the named one keeps the entries of its full blocks (never copied).
        Without ``owner_full_blocks`` the named sequence is left to the caller (operation_sequences counts
        a copied full block as the waste it is, see _waste)."""
        for s, table in before.tables.items():
            now = self.layout.tables.get(s)
            if now is None or (s == owner and not owner_full_blocks):
                continue  # freed, or left to the caller
            kept = now if s != owner else now[:before.lens[s] // self.block_size]
            if not np.array_equal(kept, table if s != owner else table[:len(kept)]):
                whose = "every other holder keeps its table" if s != owner else "a full block is never copied"
                fail(f"{self.ops[-1]} changed block_table({s}) from {diagnosis.short(table)} to "
                     f"{diagnosis.short(now)}: {whose}", self.case(), kind="corrupt")

    # -- what the cache holds -----------------------------------------------------------------

    def read_layout(self, after) -> Layout:
        nb, bs = self.sizes[:2]
        case = self.case()
        pools = [expect_array(getattr(self.cache, name), call=f"cache.{name} {after}", shape=self.sizes,
                              kind="f", case=case) for name in ("key_pool", "value_pool")]
        layout = Layout(bs, *pools)
        for s in self.model.live():
            L = self.cache.call("seq_len", s)
            if not _is_int(L) or L != self.model.length(s):
                fail(f"seq_len({s}) is {summarize(L)} {after}; expected {self.model.length(s)}", case,
                     kind="corrupt")
            table = _int_array(self.cache.call("block_table", s), call=f"block_table({s}) {after}",
                               shape=(math.ceil(L / bs),), case=case)
            if ((table < 0) | (table >= nb)).any() or len(set(table.tolist())) != len(table):
                fail(f"block_table({s}) {after} is {diagnosis.short(table)}: entries must be distinct "
                     f"block numbers in 0..{nb - 1}", case, kind="corrupt")
            layout.tables[s], layout.lens[s] = table.astype(np.int64), int(L)
        return layout

    def expect_state(self, after, freed=None, tables_before=None) -> Layout:
        """Every live sequence reads back its own history; the free count matches the tables."""
        layout = self.read_layout(after)
        self._expect_tokens(layout, after)
        self._expect_free_count(layout, after, freed, tables_before)
        return layout

    def _expect_tokens(self, layout, after):
        mismatches = []
        for s in self.model.live():
            keys, values = layout.gather(s)
            same = (np.isclose(keys, self.model.keys[s], rtol=0, atol=1e-12).all(axis=(1, 2))
                    & np.isclose(values, self.model.values[s], rtol=0, atol=1e-12).all(axis=(1, 2)))
            mismatches += [(s, int(p)) for p in np.flatnonzero(~same)]
        if not mismatches:
            return
        s, p = mismatches[0]
        block = int(layout.tables[s][p // self.block_size])
        message = (f"{after}, sequence {s}'s token at position {p} (block {block}, slot "
                   f"{p % self.block_size} by its block table) is not the one appended there; "
                   f"{len(mismatches)} stored tokens of live sequences differ from what they appended")
        sentence = diagnosis.overwritten_by_sharer(layout, self.model, mismatches)
        if sentence:
            self.diagnose("fork_without_copy_on_write", sentence)
            message += f"; {sentence}"
        fail(message, self.case(), kind="corrupt")

    def _expect_free_count(self, layout, after, freed, tables_before):
        got = self.num_free = self.cache.call("num_free_blocks")
        held = {int(b) for t in layout.tables.values() for b in t}
        expected = self.sizes[0] - len(held)
        if _is_int(got) and got == expected:
            return
        message = (f"num_free_blocks() is {summarize(got)} {after}; the live sequences' tables hold "
                   f"{len(held)} distinct blocks of {self.sizes[0]}, so {expected} should be free")
        found = None
        if _is_int(got) and got < expected:
            found = ("blocks_leaked", (f"{plural(expected - got, 'block')} that no live sequence holds are not free "
                                       f"{after}: a block must return to the pool when its last holder lets go"))
        elif _is_int(got) and freed is not None:
            sentence = diagnosis.returned_shared_blocks(freed, tables_before, layout, got, expected)
            found = ("free_ignores_sharing", sentence) if sentence else None
        if found:
            self.diagnose(*found)
            message += f"; {found[1]}"
        fail(message, self.case(), kind="corrupt")

    # -- attention ----------------------------------------------------------------------------

    def attend(self, seq_id, T=None, dtype=np.float64, rng=None):
        """paged_attention for the last T tokens of ``seq_id`` (T random when None); a wrong
        output is kept in ``failures`` and reported by :meth:`finish`."""
        rng = rng or self.rng
        L = self.model.length(seq_id)
        if T is None:
            T = 1 if rng.random() < 0.4 else int(rng.integers(1, min(L, 9) + 1))
        q = rng.standard_normal((T, self.num_q_heads, self.sizes[3])).astype(dtype)
        call = f"paged_attention(cache, {seq_id}, q [{T}, {self.num_q_heads}, {self.sizes[3]}])"
        if self.held is None:
            got = self.ex.candidate.call("paged_attention", self.cache, seq_id, q)
        else:
            got, box = self.held.call(self.ex.candidate.paged_attention, self.cache, seq_id, q)
            self._reuse(box, (2,), [q], call)
        got = _float_array(got, call=call, shape=q.shape, case=self.case())
        want = oracle.attention(self.model.keys[seq_id], self.model.values[seq_id], q.astype(np.float64))
        failure = Failure(self.layout, seq_id, q, got, want, self.ops[-1] if self.ops else "")
        if not failure.right():
            self.failures.append(failure)

    def _reuse(self, box, indexes, arrays, call):
        """The caller writes other values into the arrays it passed (its next chunk, in the same buffers)."""
        new = [self.rng.standard_normal(a.shape).astype(a.dtype) for a in arrays]
        self.held.overwrite(box, indexes, new)
        self.reused.append((box, indexes, new, call))

    def expect_arguments_kept(self):
        """Every array the caller passed still holds what the caller last wrote there."""
        for box, indexes, new, call in self.reused:
            if not self.held.still_holds(box, indexes, new):
                fail(f"an array the caller passed to {call} {ARGUMENT_CHANGED}", self.case(), kind="hygiene")

    def attend_all(self):
        for s in self.model.live():
            if self.model.length(s):
                self.attend(s)

    def finish(self):
        report_attention(self.ex, self.failures, self.case())


def report_attention(ex, failures: list[Failure], case=None, diagnose=None):
    """Fail on the smallest wrong paged_attention output, naming the mistakes that explain all."""
    diagnose = diagnose or ex.diagnose
    if not failures:
        return
    f = min(failures, key=lambda x: x.size)
    T, Hq, D = f.q.shape
    L = f.layout.lens[f.seq_id]
    error = error_of(f.got, f.want, axis=2)  # [T, Hq]
    i, h = (int(x) for x in np.argwhere(f.off_by().any(axis=2))[0])
    where = f" after {f.after}" if f.after else " (on a layout the grader built, tables shuffled)"
    message = (f"paged_attention(cache, {f.seq_id}, q [{T}, {Hq}, {D}]){where}: query {i} (position "
               f"{L - T + i} of {L}), head {h} differs from dense attention over the sequence's own tokens "
               f"by up to {float(error.max()):.3g}; {plural(len(failures), 'call')} wrong")
    if not np.isfinite(f.got).all():
        message += "; some outputs are NaN or infinite"
    found = diagnosis.explain(failures)
    for diagnosis_id, sentence in found:
        diagnose(diagnosis_id, sentence)
    if found:
        message += "".join(f"; {sentence}" for _, sentence in found)
    elif here := diagnosis.explain([f]):  # this case alone fits, the others do not: no name
        message += f"; consistent with {' and '.join(i for i, _ in here)} in this case, but not in the others"
    kind = "nan" if not np.isfinite(f.got).all() else "wrong"
    fail(message, dict(f.case or case, seq_id=int(f.seq_id), T=T, seq_len=int(L)), kind=kind)


# -- a layout the grader builds and lends -------------------------------------------------------


class LentLayout(Lent):
    """A paged layout held by the grader with only what the contract lets paged_attention read: seq_len,
    block_table, key_pool and value_pool. Nothing else (no block_size, num_kv_heads, num_free_blocks...):
    an answer that reads more than the contract names works on its own cache only, and fails here."""

    wire_type, wire_methods = "PagedLayout", ("seq_len", "block_table")

    def __init__(self, layout: Layout):
        self.layout = layout

    def wire_attrs(self) -> dict:
        return {"key_pool": self.layout.key_pool, "value_pool": self.layout.value_pool}

    def _seq(self, seq_id):
        if not _is_int(seq_id) or int(seq_id) not in self.layout.lens:
            raise ValueError(f"unknown sequence {seq_id!r}")
        return int(seq_id)

    def seq_len(self, seq_id):
        return self.layout.lens[self._seq(seq_id)]

    def block_table(self, seq_id):
        return self.layout.tables[self._seq(seq_id)].copy()


def lent_layout(rng, lens, block_size, num_kv_heads, head_dim, beyond_float32=False) -> Layout:
    """Sequences of the given lengths on shuffled blocks; every slot that holds none of their
    tokens (after a last token, in a spare block) holds garbage; ``beyond_float32``: some of it float32 cannot
    hold (an answer that casts whole blocks to float32 queries' dtype before masking gets NaN)."""
    counts = [math.ceil(L / block_size) for L in lens]
    used = sum(counts)
    spare = max(counts) + int(rng.integers(0, 3))  # reading from a first block onward stays in the pool
    shape = (used + spare, block_size, num_kv_heads, head_dim)
    layout = Layout(block_size, *(garbage(rng, shape, beyond_float32=beyond_float32) for _ in range(2)))
    order, start = rng.permutation(used), 0
    ids = rng.choice(np.arange(1, 1000), size=len(lens), replace=False)
    for seq_id, L, n in zip(ids, lens, counts):
        layout.tables[int(seq_id)], layout.lens[int(seq_id)] = order[start:start + n].astype(np.int64), L
        p = np.arange(L)
        where = layout.tables[int(seq_id)][p // block_size], p % block_size
        for pool in (layout.key_pool, layout.value_pool):
            pool[where] = rng.standard_normal((L, num_kv_heads, head_dim))
        start += n
    return layout


def _queries(rng, keys, T, Hq, extreme, dtype, offsets=False):
    """Queries [T, Hq, D]; ``extreme``: scaled so the largest |score| over the keys is 1e2 .. 1e4;
    ``offsets`` (keys whose first component is 1): each row's scores spread around its own offset
    in [-1e4, 1e4], the first row's all far below 0, where a running max started at 0 underflows,
    and others spread by thousands, where a max taken over keys the row may not see underflows."""
    q = rng.standard_normal((T, Hq, keys.shape[2]))
    if offsets:  # score ~ offset + spread * N(0, 1), inside [-1e4, 1e4]: rows apart, and keys apart in a row
        offset = rng.uniform(-6e3, 6e3, (T, Hq))
        offset[0, 0] = -rng.uniform(800, 6e3)
        spread = rng.uniform(0, 1, (T, Hq)) * (1e4 - np.abs(offset)) / 4
        spread[0, 0] = min(spread[0, 0], 50.0)  # the first row: every score far below 0
        q[..., 1:] *= spread[..., None]
        q[..., 0] = offset * math.sqrt(keys.shape[2])
    elif extreme:
        top = np.abs(np.einsum("thd,ngd->thng", q, keys)).max() / math.sqrt(keys.shape[2])
        q *= 10.0 ** rng.uniform(2, 4) / top
    return q.astype(dtype)


def expect_lent_cases(ex, cases, extreme=False):
    """cases: (lens, block_size, Hkv, group, D, [(seq index, T)]): compare every call with the oracle
    (``extreme``: scores up to 1e4, rows far below 0 in every other pair of calls, float32 queries in
    every other call, unread slots holding float64 values float32 cannot hold)."""
    failures = []
    for lens, bs, Hkv, group, D, calls in cases:
        layout = lent_layout(ex.rng, lens, bs, Hkv, D, beyond_float32=extreme)
        if extreme:  # a shared first component: queries can put a row's scores anywhere (_queries)
            layout.key_pool[..., 0] = 1.0
        ids = list(layout.lens)
        case = {"block_size": bs, "num_kv_heads": Hkv, "query_heads": Hkv * group, "head_dim": D,
                "seq_lens": [layout.lens[s] for s in ids], "seed": ex.seed}
        for n, (index, T) in enumerate(calls):
            s = ids[index]
            keys, _ = layout.gather(s)
            dtype = np.float32 if extreme and n % 2 else np.float64
            q = _queries(ex.rng, keys, T, Hkv * group, extreme, dtype, offsets=extreme and n % 4 >= 2)
            failures.append(_lent_call(ex, layout, s, q, case))
    report_attention(ex, [f for f in failures if f is not None])


def _lent_call(ex, layout, s, q, case) -> Failure | None:
    """paged_attention on the grader's ``layout`` for sequence ``s``: the failure, or None when the oracle agrees."""
    keys, values = layout.gather(s)
    T, Hq, D = q.shape
    precision = ", float32" if q.dtype != np.float64 else ""
    call = f"paged_attention(layout, {s}, q [{T}, {Hq}, {D}]{precision})"
    got = _float_array(ex.candidate.call("paged_attention", LentLayout(layout), s, q), call=call, shape=q.shape,
                       case=case)
    failure = Failure(layout, s, q, got, oracle.attention(keys, values, q.astype(np.float64)), case=case)
    return None if failure.right() else failure


def _outscored_by_unseen_keys(ex) -> list:
    """T >= 2 queries whose first one scores about -x over every key it may see and +x over the later keys it
    may not (x in 3e3 .. 6e3, inside section 1's 1e4): a softmax shifted by a max over keys the row may not
    see leaves exp of every visible score 0 (a NaN, or zeros), which no spread of random scores is sure to
    show. Then x just under 1e4, exactly (the first query's other dimensions zero): a causal mask filled
    with a finite -1e4 (BERT's) lets the later keys in at the bottom of the range the contract allows."""
    rng, failures = ex.rng, []
    for bs, Hkv, group, far in ((3, 1, 2, (3e3, 6e3)), (4, 2, 1, (3e3, 6e3)), (2, 1, 3, (9_990.0, 9_998.0))):
        L, T, D = odd_size_closed(rng, 14, 40), int(rng.integers(2, 12)), odd_size_closed(rng, 3, 9)
        layout = lent_layout(rng, [L], bs, Hkv, D)
        (s,) = layout.lens
        p = np.arange(L)
        layout.key_pool[layout.tables[s][p // bs], p % bs, :, 0] = np.where(p > L - T, -1.0, 1.0)[:, None]
        q = rng.standard_normal((T, Hkv * group, D))
        if far[0] > 6e3:
            q[0, :, 1:] = 0.0  # scores exactly -x and +x: none past the contract's 1e4
        q[0, :, 0] = -rng.uniform(*far) * math.sqrt(D)
        case = {"block_size": bs, "num_kv_heads": Hkv, "query_heads": Hkv * group, "head_dim": D,
                "seq_lens": [L], "seed": ex.seed}
        failures.append(_lent_call(ex, layout, s, q, case))
    return [f for f in failures if f is not None]


def _lent_calls(rng, lens):
    """For each sequence a T = 1 call and a T > 1 call (when it has two tokens)."""
    calls = []
    for index, L in enumerate(lens):
        calls.append((index, 1))
        if L > 1:
            calls.append((index, int(rng.integers(2, min(L, 12) + 1))))
    return calls


def _lens(rng, count, block_size, longest=60):
    """Lengths mostly not a multiple of the block size (a partly filled last block)."""
    lens = []
    for _ in range(count):
        L = int(rng.integers(2, longest))
        lens.append(L + 1 if L % block_size == 0 else L)
    return lens


# -- checks: the cache ------------------------------------------------------------------------


def check_fresh_cache(ex):
    """A new cache: float64 pools [num_blocks, block_size, Hkv, D], every block free; a new sequence is empty."""
    drawn = (odd_size_closed(ex.rng, 9, 40), 13, odd_size_closed(ex.rng, 1, 5), odd_size_closed(ex.rng, 3, 17))
    for sizes in [(1, 1, 1, 1), (5, 7, 3, 2), drawn]:
        run = Run(ex, *sizes)
        run.add(int(ex.rng.integers(0, 10**6)))
        run.add(0)


def check_caches_side_by_side(ex):
    """Three caches of the same sizes, the third made midway, their operations interleaved: each holds and
    attends to its own tokens only (nothing is shared between instances)."""
    rng = ex.rng
    sizes = (odd_size_closed(rng, 40, 60), odd_size_closed(rng, 3, 9), odd_size_closed(rng, 1, 3),
             odd_size_closed(rng, 3, 9))

    def another():
        run = Run(ex, *sizes, group=2)
        run.ops.append("(other caches of these sizes take operations between these)")
        run.add(1), run.add(4)
        return run

    runs = [another(), another()]
    for step in range(12):
        if step == 6:
            runs.append(another())
        for run in runs:
            seq = 4 if step % 2 else 1
            run.append(seq, int(rng.integers(1, sizes[1] + 3)))
            run.attend(seq)
    for run in runs:
        run.attend_all()
        run.finish()


def check_single_sequence(ex):
    """One sequence appended in chunks (T = 1, T > 1, T = 0, float32, across block boundaries), read back after each;
    a block size past 1024 too."""
    rng = ex.rng
    for bs in (7, 13, 1):
        run = Run(ex, odd_size_closed(rng, 40, 60), bs, odd_size_closed(rng, 1, 3), odd_size_closed(rng, 3, 9), group=3)
        run.add(3)
        for T in [1, bs - 1 if bs > 1 else 2, 0, 1, 2 * bs + 3, 1, odd_size_closed(rng, 2, 9)]:
            run.append(3, T)
            if T:
                run.attend(3)
        run.append(3, 4, dtype=np.float32)  # float32 inputs are allowed; the pools stay float64
        run.attend(3, 2, dtype=np.float32)
        run.attend(3, run.model.length(3))  # every token at once, as in prefill
        run.finish()
    run = Run(ex, 3, _large_block_sizes(rng)[1], 1, 2, group=2)  # past 1024: a small pool of large blocks
    run.add(3)
    for T in (1, run.block_size - 2, 3):  # the first block nearly filled, then across its end
        run.append(3, T)
    run.attend(3, 1), run.attend(3, 4)
    run.finish()


def _expect_out_of_blocks(run, seq_id, T, why):
    """append must raise RuntimeError and change nothing (tables, lengths, free count, contents)."""
    k, v = (run.rng.standard_normal((T, *run.sizes[2:])) for _ in range(2))
    call = f"append({seq_id}, {_tokens(T)}) with {why} (it needs {_blocks_needed(run, seq_id, T)})"
    before = {s: t.copy() for s, t in run.layout.tables.items()}
    try:
        value = run.cache.call("append", seq_id, k, v)
    except CandidateRaised as exc:
        if not exc.is_a("RuntimeError"):
            fail(f"{call} raised {exc.type_name} ({exc.message}); expected RuntimeError", run.case())
    else:
        fail(f"{call} returned {summarize(value)}; expected RuntimeError (out of blocks)", run.case())
    run.ops.append(f"{call} -> RuntimeError")
    layout = run.expect_state(f"after the refused {call}")
    for s, table in before.items():
        if not np.array_equal(layout.tables[s], table):
            fail(f"the refused {call} changed block_table({s}) from {diagnosis.short(table)} to "
                 f"{diagnosis.short(layout.tables[s])}", run.case(), kind="corrupt")


def _blocks_needed(run, seq_id, T):
    """Blocks an append takes from this cache, counting the copy of a last block it shares
    (read from the candidate's own tables, so a cache that copied at fork is judged on its own)."""
    table, L, bs = run.layout.tables[seq_id], run.layout.lens[seq_id], run.block_size
    shared = L % bs != 0 and any(table[-1] in t for s, t in run.layout.tables.items() if s != seq_id)
    return math.ceil((L + T) / bs) - len(table) + shared


def _tokens_for(run, seq_id, blocks):
    """The most tokens an append to ``seq_id`` can take with exactly ``blocks`` blocks."""
    T = 0
    while _blocks_needed(run, seq_id, T + 1) <= blocks:
        T += 1
    return T


def check_out_of_blocks(ex):
    """Too few free blocks: append raises RuntimeError and changes nothing; exactly enough succeeds."""
    bs = 7
    run = Run(ex, 9, bs, 3, 5, group=3)
    run.add(1), run.add(2)
    run.append(1, 2 * bs + 6)  # 3 blocks, last one 6/7 full
    run.append(2, 3 * bs + 4)  # 4 blocks
    free = run.cache.call("num_free_blocks")
    _expect_out_of_blocks(run, 1, _tokens_for(run, 1, free) + 1, f"{free} free blocks")
    run.add(3)
    _expect_out_of_blocks(run, 3, free * bs + 1, f"{free} free blocks, a new sequence")
    run.append(1, _tokens_for(run, 1, free))  # exactly enough: the pool is now empty
    run.append(2, bs - 4)  # fills sequence 2's last block: needs no new block
    _expect_out_of_blocks(run, 2, 1, "no free block")
    run.attend(1), run.attend(2)
    run.finish()
    # after a fork the append may need a copy of the shared, partly filled last block
    run = Run(ex, 20, bs, 1, 3, group=5)
    run.add(1)
    run.append(1, 4 * bs + 2)
    run.fork(1, 2)
    free = run.cache.call("num_free_blocks")
    _expect_out_of_blocks(run, 2, _tokens_for(run, 2, free) + 1, f"{free} free blocks, after a fork")
    run.append(2, _tokens_for(run, 2, free))
    run.attend(1), run.attend(2)
    run.finish()
    for shared, full, parent in itertools.product((True, False), (True, False), (False, True)):
        if parent and not shared:
            continue
        _exactly_enough(ex, bs, shared, full, parent)


def _exactly_enough(ex, bs, shared, full, parent):
    """One state of the appending sequence's last block: held alone or shared by a fork (the parent
    or the child appends), partly filled or full. An empty append changes nothing; one token too
    many is refused; exactly enough is taken, and then an empty append on the empty pool still works."""
    run = Run(ex, 11, bs, 1, 3, group=2)
    run.add(1)
    run.append(1, 3 * bs + (0 if full else 4))
    if shared:
        run.fork(1, 2)
    seq = 1 if parent or not shared else 2
    state = (f"its last block {'full' if full else 'partly filled'} and "
             f"{'shared by a fork, the ' + ('parent' if parent else 'child') + ' appending' if shared else 'its own'}")
    run.append(seq, 0)
    free = run.cache.call("num_free_blocks")
    _expect_out_of_blocks(run, seq, _tokens_for(run, seq, free) + 1, f"{free} free blocks, {state}")
    T = _tokens_for(run, seq, free)
    try:
        run.append(seq, T)
    except CandidateRaised as exc:
        fail(f"append({seq}, {_tokens(T)}) with {free} free blocks, {state}, raised {exc.type_name} "
             f"({exc.message[:80]}), yet it needs exactly {_blocks_needed(run, seq, T)}"
             + (" (a full shared block is never copied: the append opens a new one)" if shared and full else ""),
             run.case(), kind="corrupt")
    for s in run.model.live():
        run.append(s, 0)
        run.attend(s)
    run.finish()


def check_long_sequence(ex):
    """A sequence past 2^16 tokens between a short one, appended in large chunks; read back and attended. Once in
    blocks of 13, once in blocks of 1: a pool past 2^16 blocks, whose block ids a 16-bit table cannot hold."""
    rng = ex.rng
    for bs in (13, 1):
        total = 70_000 + odd_size_closed(rng, 3, 2000)
        chunks = [1, 29_999, 3, 20_011]
        chunks.append(total - sum(chunks))
        run = Run(ex, math.ceil(total / bs) + math.ceil(15 / bs) + 12, bs, 1, 3, group=3)  # sequence 1: 15 tokens
        run.add(0), run.add(1)
        for n, T in enumerate(chunks):
            run.append(0, T)
            if n < 3:
                run.append(1, 5)
        run.attend(0, 1), run.attend(0, 3), run.attend(1, 3)
        run.finish()


def check_numpy_integer_arguments(ex):
    """Sizes and sequence ids given as numpy integers (int8 to int64) work everywhere."""
    _numpy_run(ex, int, int, int, int)  # Python ints first: a wrong answer is said as such, not blamed on the type
    with other_argument_types("a numpy integer size or sequence id was rejected"):
        _numpy_run(ex, np.int64, np.int64, np.int64, np.int64)
    _numpy_run(ex, np.int64, np.int32, np.int16, np.int8)  # once int64 works, a narrow dtype that fails is wrong


def _numpy_run(ex, a, b, c, d):
    """One run of every operation, its ints made by the four given types."""
    run = Run(ex, a(50), b(7), c(3), d(5), group=5)
    run.add(a(11)), run.add(d(12))
    run.append(b(11), 9), run.append(a(12), 16), run.fork(c(11), a(13)), run.append(a(13), 3)
    run.free(c(12))
    run.attend(d(13), 2), run.attend(a(11), 1)
    run.finish()


# -- checks: operation sequences against the model ------------------------------------------------

# (num_blocks, block_size, num_kv_heads, head_dim, query heads per kv head): small pools run out
SEQUENCE_SIZES = [(9, 3, 2, 3, 2), (6, 1, 1, 4, 3), (11, 5, 3, 2, 1), (8, 7, 1, 3, 5)]
SEQUENCES, STEPS = 3, 30
IDS = 6  # ids a sequence draws (drawn.seq_ids): any int is an id; a freed id comes back


def _draw_sequence(rng, sizes) -> list[Op]:
    """Operations a cache meets in serving, aimed at the boundaries: appends that end a block
    exactly, T = 0, chunks larger than the pool, forks of full and partly filled blocks."""
    nb, bs = sizes[0], sizes[1]
    live, ops, ids = {}, [], seq_ids(rng, IDS)  # id -> length, as far as the draws know (the model decides in play)
    for _ in range(STEPS):
        seed, dead = int(rng.integers(2**31)), [s for s in ids if s not in live]
        kind = rng.choice(["add", "append", "append", "append", "fork", "free", "attend", "attend"])
        if kind == "add" or not live:
            if dead:
                live[s := int(rng.choice(dead))] = 0
                ops.append(Op("add", (s,)))
            continue
        s = int(rng.choice(list(live)))
        if kind == "append":
            T = int(rng.choice([0, 1, (-live[s]) % bs or bs, int(rng.integers(2, 2 * bs + 2)),
                                int(rng.integers(bs, nb * bs + 2))]))
            dtype = "float32" if rng.random() < 0.2 else "float64"
            live[s] += T
            ops.append(Op("append", (s, T, seed, dtype),
                          f"{s}, {_tokens(T)}{', float32' if dtype != 'float64' else ''}"))
        elif kind == "fork" and dead:
            live[c := int(rng.choice(dead))] = live[s]
            ops.append(Op("fork", (s, c)))
        elif kind == "free":
            del live[s]
            ops.append(Op("free", (s,)))
        elif kind == "attend" and live[s]:
            T = 1 if rng.random() < 0.4 else int(rng.integers(1, live[s] + 1))
            ops.append(Op("attend", (s, T, seed), f"cache, {s}, q of {_tokens(T)}"))
    return ops


def _appended(s, T, rng, dtype="float64") -> Op:
    return Op("append", (s, T, int(rng.integers(2**31)), dtype), f"{s}, {_tokens(T)}")


def _attended(s, T, rng) -> Op:
    return Op("attend", (s, T, int(rng.integers(2**31))), f"cache, {s}, q of {_tokens(T)}")


def _reused_ids(rng, sizes) -> list[Op]:
    """Ids that come back: ``a`` is attended, freed, added again and appended to at least its old length,
    then attended; ``b``, attended in its first life, is freed and comes back as a fork of the new ``a``.
    Whatever a cache or paged_attention keeps per id must end with ``free``: the sequence that
    comes back under the id is a new one, with its own tokens."""
    nb, bs = sizes[:2]
    room = nb * bs
    a, b = (int(x) for x in rng.choice(seq_ids(rng, IDS), 2, replace=False))
    n = int(rng.integers(2, max(3, room // 3) + 1))  # a's first life
    m = int(rng.integers(1, min(n, max(2, room // 4)) + 1))  # b's first life: no longer than a's
    again = n + int(rng.integers(0, 2))  # a's second life: at least as long as its first
    return [Op("add", (a,)), _appended(a, n, rng), _attended(a, n, rng), Op("add", (b,)), _appended(b, m, rng),
            _attended(b, m, rng), Op("free", (a,)), Op("add", (a,)), _appended(a, again, rng),
            _attended(a, again, rng), Op("free", (b,)), Op("fork", (a, b)), _appended(b, 1, rng),
            _attended(b, again + 1, rng)]


def _apply(run, op) -> str | None:
    """Apply ``op`` to both sides and compare; an op the model calls invalid is skipped (a
    shrunk sequence may drop the add an op needed). Returns a waste note, or None."""
    model, name, args = run.model, op.name, op.args
    live = set(model.live())
    if name == "add" and args[0] not in live:
        run.add(args[0])
    elif name == "fork" and args[0] in live and args[1] not in live:
        try:
            run.fork(*args)
        except CandidateRaised as exc:
            if not exc.is_a("RuntimeError"):
                raise
            fail(f"{op} raised RuntimeError ({exc.message[:80]}): a fork shares the parent's blocks, so it "
                 "takes none and cannot run out", run.case(), kind="efficiency")
    elif name == "free" and args[0] in live:
        run.free(args[0])
    elif name == "attend" and args[0] in live and model.length(args[0]):
        s, T, seed = args
        run.attend(s, min(T, model.length(s)), rng=np.random.default_rng(seed))
        report_attention(run.ex, run.failures, run.case(), run.diagnose)
    elif name == "append" and args[0] in live:
        return _append_or_refuse(run, *args)
    return _waste(run)


def _append_or_refuse(run, seq_id, T, seed, dtype):
    """An append the model either takes or refuses for want of blocks (RuntimeError, nothing changed)."""
    rng, model = np.random.default_rng(seed), run.model
    k, v = (rng.standard_normal((T, *run.sizes[2:])).astype(dtype) for _ in range(2))
    need, free = model.blocks_needed(seq_id, T), run.sizes[0] - model.fewest_blocks()
    fits = need <= free
    before = {s: t.copy() for s, t in run.layout.tables.items()}
    call = f"append({seq_id}, {_tokens(T)})"
    try:
        run.cache.call("append", seq_id, k, v)
    except CandidateRaised as exc:
        if not exc.is_a("RuntimeError"):
            raise
        waste = _waste(run)
        if fits and not waste:
            fail(f"{call} raised RuntimeError ({exc.message[:80]}), yet it needs {need} of the {free} free "
                 "blocks", run.case(), kind="corrupt")
        run.ops.append(f"{call} -> RuntimeError")
        layout = run.expect_state(f"after the refused {call}")
        for s, table in before.items():
            if not np.array_equal(layout.tables[s], table):
                fail(f"the refused {call} changed block_table({s}) from {diagnosis.short(table)} to "
                     f"{diagnosis.short(layout.tables[s])}", run.case(), kind="corrupt")
        return waste
    before_len, before_layout = model.length(seq_id), run.layout
    model.append(seq_id, k.astype(np.float64), v.astype(np.float64))
    run._did(call, before_layout, owner=seq_id, owner_full_blocks=False)
    if T == 0:
        run.expect_nothing_changed(before_layout)
    if T:  # first what it wrote: a cache that shares what it should copy also needs fewer blocks
        _expect_written_alone(run, seq_id, before_len, call)
    if not fits:
        fail(f"{call} succeeded, but it needs {need} blocks (the copy of a shared last block included) and "
             f"only {free} are free: expected RuntimeError, with nothing changed", run.case(), kind="corrupt")
    return _waste(run)


def _expect_written_alone(run, seq_id, start, call):
    """The blocks an append wrote into are held by the appending sequence alone (copy-on-write),
    even where no other sequence has read the slots yet."""
    table, bs = run.layout.tables[seq_id], run.block_size
    written = {int(b) for b in table[start // bs:]}  # the blocks of positions start .. seq_len - 1 (T >= 1)
    for other, t in run.layout.tables.items():
        shared = written & {int(b) for b in t} if other != seq_id else set()
        if shared:
            block = min(shared)
            sentence = (f"{call} wrote into block {block}, which sequence {other} also holds (a fork gave them "
                        "the same blocks): an append into a block another sequence holds must copy it first")
            run.diagnose("fork_without_copy_on_write", sentence)
            fail(f"after {call}, block {block} holds tokens of sequence {seq_id} and is still in sequence "
                 f"{other}'s table; {sentence}", run.case(), kind="corrupt")


def _waste(run) -> str | None:
    """More blocks in use than copy-on-write needs is waste (efficiency); fewer is sharing a block
    that an append should have copied (caught by the tokens, or here by the count)."""
    used, fewest = run.sizes[0] - run.num_free, run.model.fewest_blocks()
    if used < fewest:
        fail(f"after {run.ops[-1]}, the cache holds {used} blocks, fewer than the {fewest} its sequences' "
             "different contents need: a block is still shared where an append should have copied it",
             run.case(), kind="corrupt")
    if used > fewest:
        return (f"after {run.ops[-1]}, the cache holds {used} blocks; copy-on-write needs only {fewest} "
                "(fork shares every block, an append copies only a shared, partly filled last block and "
                "never a full one)")
    return None


def _player(ex, sizes, memo):
    """play(ops) for grader.stateful: (failure, mistakes it names) of one fresh cache, or None."""
    nb, bs, Hkv, D, group = sizes

    def play(ops):
        key = tuple(ops)
        if key not in memo:
            named = []
            try:
                run = Run(ex, nb, bs, Hkv, D, group, diagnose=lambda *found: named.append(found))
                waste = None
                for op in ops:
                    waste = waste or _apply(run, op)
                memo[key] = (CheckFailure(waste, kind="efficiency"), []) if waste else None
            except CheckFailure as exc:
                memo[key] = exc, named
            except CandidateRaised as exc:
                memo[key] = CheckFailure(f"{op} raised {exc.type_name} ({exc.message[:120]}) on a valid call",
                                         kind="crash"), []
        return memo[key]
    return play


def _only(play, kinds):
    """``play`` counting only failures of the given kinds, so shrinking keeps a failure as grave."""
    def filtered(ops):
        result = play(ops)
        return result if result is not None and result[0].kind in kinds else None
    return filtered


def check_operation_sequences(ex):
    """Random sequences of add, append (T = 0, 1, many), fork, free and attention, the pool running out; in
    every pool size, ids freed and then added again (or forked into), appended to and attended.

    Every observable is compared after every call."""
    drawn = []
    for n, sizes in enumerate(SEQUENCE_SIZES):
        sequences = [_draw_sequence(ex.rng, sizes) for _ in range(SEQUENCES)]
        if n < 2:  # block sizes 3 and 1: the last sequence starts with ids that come back after free
            sequences[-1] = (reused := _reused_ids(ex.rng, sizes)) + sequences[-1][:STEPS - len(reused)]
        drawn.append((sizes, sequences, {}))
    hard = tuple(kind for kind in FAILURE_KINDS if kind != "efficiency")
    for kinds in (hard, ("efficiency",)):  # a wrong answer first; waste only when nothing is wrong
        for sizes, sequences, memo in drawn:
            play = _only(_player(ex, sizes, memo), kinds)
            failing = [(ops, found) for ops in sequences if (found := play(ops)) is not None]
            if failing:  # the first one shrunk is the case shown; a mistake is named only when every
                ops, (failure, named) = shrink(*failing[0], play)  # failing sequence, shrunk or not, shows it
                shared = set.intersection(*({i for i, _ in found[1]} for _, found in failing))
                for mistake in named:
                    if mistake[0] in shared:
                        ex.diagnose(*mistake)
                nb, bs, Hkv, D, group = sizes
                case = {"num_blocks": nb, "block_size": bs, "num_kv_heads": Hkv, "head_dim": D,
                        "query_heads": Hkv * group, "operations": describe_ops(ops), "seed": ex.seed}
                fail(failure.message, case, failure.picture, failure.kind)


# -- checks: paged_attention on the grader's layout -----------------------------------------------


def check_attention_gqa_groups(ex):
    """paged_attention with groups of 3 and 5 query heads per kv head, block sizes 7 and 13, T = 1 and T > 1."""
    rng, cases = ex.rng, []
    for bs, Hkv, group in ((7, 3, 3), (13, 1, 5), (7, 3, 5), (13, 5, 3), (7, 2, 1)):
        lens = _lens(rng, 3, bs)
        cases.append((lens, bs, Hkv, group, odd_size_closed(rng, 3, 17), _lent_calls(rng, lens)))
    expect_lent_cases(ex, cases)


def check_attention_extreme_scores(ex):
    """paged_attention with scaled scores up to 1e4 in size and float32 queries, values of any size in unread slots
    (up to 1e300, past float32's range, beside the float32 queries), and a first query whose visible keys all
    score thousands below the later keys it may not see."""
    rng, cases = ex.rng, []
    for bs, Hkv, group in ((5, 2, 3), (1, 1, 2), (7, 3, 1)):
        lens = _lens(rng, 2, bs, longest=30)
        cases.append((lens, bs, Hkv, group, odd_size_closed(rng, 3, 9), _lent_calls(rng, lens)))
    expect_lent_cases(ex, cases, extreme=True)
    report_attention(ex, _outscored_by_unseen_keys(ex))


def check_attention_edges(ex):
    """T = seq_len, a single token, lengths that fill whole blocks, block size 1, one block per sequence, and
    block sizes past 512, 1024 and 4096 (no power of two), with chunks of T past 256 queries."""
    rng, cases = ex.rng, []
    for bs, Hkv, group in ((7, 1, 3), (13, 3, 1), (1, 2, 3)):
        lens = [1, bs, 2 * bs, 2 * bs + 1, int(rng.integers(2, bs + 2))]
        calls = [(n, L) for n, L in enumerate(lens)] + [(n, 1) for n in range(len(lens))]
        cases.append((lens, bs, Hkv, group, odd_size_closed(rng, 3, 9), calls))
    for bs in _large_block_sizes(rng):  # section 1: sizes as large as memory allows
        lens = [bs + int(rng.integers(1, 40))]  # a full block and a second one begun
        T = odd_size_closed(rng, 257, 500)  # past the query tiles of 64, 128 and 256 a kernel may use
        cases.append((lens, bs, 1, 2, 2, [(0, 1), (0, 41), (0, T)]))
    expect_lent_cases(ex, cases)


def _large_block_sizes(rng) -> list[int]:
    """Block sizes just past the powers of two a kernel's partitions and tiles are made of (512 tokens as in
    vLLM's paged_attention_v2, 1024, 4096), none of them a power of two: a size an answer derives from such
    a constant (a partition of 512 // block_size blocks) must still work."""
    return [odd_size_closed(rng, 513, 1023), odd_size_closed(rng, 1025, 2047), odd_size_closed(rng, 4097, 5000)]


# -- checks: efficiency and hygiene -------------------------------------------------------------


def _expect_fewest_blocks(run, after):
    used = run.sizes[0] - run.cache.call("num_free_blocks")
    fewest = run.model.fewest_blocks()
    if used < fewest:
        fail(f"{after}, the cache holds {used} blocks, fewer than the {fewest} its sequences' different "
             "contents need: a block is still shared where an append should have copied it", run.case(),
             kind="corrupt")
    if used > fewest:
        fail(f"{after}, the cache holds {used} blocks; copy-on-write needs only {fewest} (fork shares every "
             "block, an append copies only a shared, partly filled last block)", run.case(), kind="efficiency")


def check_fork_copies_nothing(ex):
    """fork takes no block, and after appends in turns the cache holds the fewest blocks copy-on-write allows; a
    block forked 65536 ways (more holders than a 16-bit count holds) is still copied before an append."""
    rng = ex.rng
    bs = 7
    run = Run(ex, 60, bs, 2, 3, group=3)
    run.add(1)
    run.append(1, 3 * bs + 2)
    try:
        for child in (2, 3, 4):
            run.fork(1 if child < 4 else 2, child)
            _expect_fewest_blocks(run, f"after {run.ops[-1]}")
        for _ in range(2):
            for s in rng.permutation([1, 2, 3, 4]):
                run.append(int(s), int(rng.integers(1, bs + 4)))
                _expect_fewest_blocks(run, f"after {run.ops[-1]}")
        tight = Run(ex, 4, bs, 1, 3)  # a fork with every block in use still succeeds
        tight.add(0)
        tight.append(0, 4 * bs - 2)
        tight.fork(0, 1)
        tight.free(0)
        tight.append(1, 2)  # the last block is no longer shared: its free slots take the tokens
    except CandidateRaised as exc:
        if not exc.is_a("RuntimeError"):
            raise
        fail(f"{exc}: a fork with no free block must succeed (it shares the parent's blocks), and once "
             "the parent is freed the child's last block takes tokens in its free slots", {"seed": ex.seed})
        # a valid call refused for want of a block the contract never takes (a copy of an unshared block, a
        # block held back for forks) is a wrong answer, not a costly one
    _expect_many_forks_share(ex, bs)


def _expect_many_forks_share(ex, bs, forks=2**16):
    """A block shared by more sequences than a 16-bit count holds (``forks`` children of one sequence) is still
    shared: an append to the parent copies its partly filled last block and takes one block. 65537 holders read
    1 in int8, uint8, int16 and uint16 alike, so a wrapped count looks unshared."""
    crowd = ex.candidate.call("PagedKVCache", 4, bs, 1, 3)
    crowd.call("add_sequence", 0)
    k = ex.rng.standard_normal((bs + 2, 1, 3))
    crowd.call("append", 0, k, k)
    _fork_all(ex, crowd, 0, forks)
    crowd.call("append", 0, k[:1], k[:1])
    free = crowd.call("num_free_blocks")
    ours = as_array(crowd.call("block_table", 0), call="block_table(0)", shape=(2,), kind="i")
    theirs = as_array(crowd.call("block_table", 1), call="block_table(1)", shape=(2,), kind="i")
    if free != 1 or ours[-1] == theirs[-1]:
        fail(f"after {bs + 2} tokens in sequence 0 of PagedKVCache(4, {bs}, 1, 3), {forks} forks of it and an "
             f"append of 1 token to it, num_free_blocks() is {free} (expected 1) and sequence 0's last block is "
             f"{int(ours[-1])}, its first child's {int(theirs[-1])}: a block shared {forks + 1} ways must be "
             "copied before the write (a reference count kept in 8 or 16 bits wraps)", {"seed": ex.seed},
             kind="corrupt")


def _fork_all(ex, cache, parent, forks):
    """cache.fork(parent, c) for c = 1 .. forks, called in the candidate's process by map in one request: a
    round trip per fork would cost seconds at 65536 of them. Each call is the cache's own fork, as a caller
    makes it."""
    builtins = ex.helper("builtins")
    calls = builtins.map(cache.fork, ex.helper("itertools").repeat(parent), builtins.range(1, forks + 1))
    ex.helper("collections").deque(calls, maxlen=0)  # runs every call, keeps none of their results


def check_keeps_its_own_copy(ex):
    """The caller reuses its k, v and q arrays as soon as a call returns (appends that fill fresh blocks exactly,
    one token, a fork, a freed sequence): the cache's contents and answers do not change, and no later call
    writes into an array the caller passed."""
    held = Held(ex)
    for sizes in ((14, 2, 2, 3),):  # block size 2: T = 1 appends, and appends that fill whole blocks
        bs = sizes[1]
        run = Run(ex, *sizes, group=2, held=held)
        run.add(1)
        for T in (bs, 2 * bs, 1, bs - 1 or 1):  # a fresh block exactly, two more, one token, the rest of a block
            run.append(1, T)
        run.attend(1)
        run.fork(1, 2)
        run.append(2, bs)
        run.append(1, 1)
        run.add(3)
        run.append(3, 1)
        run.free(1)
        run.append(2, 1)
        for s in (2, 3):
            run.attend(s)
        run.finish()
        run.expect_arguments_kept()


def check_returns_arrays(ex):
    """block_table returns an int64 array, paged_attention a float64 array (float32 queries too)."""
    run = Run(ex, 12, 5, 2, 3, group=2)
    run.add(4)
    run.append(4, 7, dtype=np.float32)
    slips = [container_slip(run.cache.call("block_table", 4), call="block_table(4)", dtype=np.int64)]
    for dtype in (np.float64, np.float32):
        q = ex.rng.standard_normal((2, 4, 3)).astype(dtype)
        slips.append(container_slip(ex.candidate.call("paged_attention", run.cache, 4, q),
                                    call=f"paged_attention(cache, 4, {np.dtype(dtype)} q)", dtype=np.float64))
    slips = [slip for slip in slips if slip]
    if slips:
        fail("; ".join(slips) + ": the right values in another container or dtype", {"seed": ex.seed},
             kind="hygiene")


def _state_snapshot(run):
    """What a caller can observe of the cache: tables, lengths, the free count, and every live sequence's keys and
    values read through its table, as bytes (storage that holds no token may hold anything, NaN included: a
    pool made with np.empty is no change; red team 23 had one graded hire when whole pools were compared)."""
    layout = run.read_layout("")
    tokens = {s: tuple(x.tobytes() for x in layout.gather(s)) for s in layout.tables}
    return ({s: t.tolist() for s, t in layout.tables.items()}, dict(layout.lens),
            run.cache.call("num_free_blocks"), tokens)


REJECTED = "an invalid call must say what is wrong and leave the cache as it was"


def _bad_calls(run) -> list:
    """(call, what) of every invalid call on ``run``'s cache (sequence 1 holds 7 tokens): each must raise
    ValueError and change nothing."""
    z = np.zeros
    bad = [("add_sequence", (1,), "an id already in use"),
           ("append", (9, z((2, 2, 3)), z((2, 2, 3))), "an unknown sequence"),
           ("append", (9, z((0, 2, 3)), z((0, 2, 3))), "an unknown sequence, with no tokens (T = 0)"),
           ("append", (1, z((0, 3, 3)), z((0, 3, 3))), "k, v with 3 kv heads, not 2, with no tokens (T = 0)"),
           ("append", (1, z((2, 3, 3)), z((2, 3, 3))), "k, v with 3 kv heads, not 2"),
           ("append", (1, z((2, 2, 4)), z((2, 2, 4))), "k, v with head_dim 4, not 3"),
           ("append", (1, z((2, 2, 3)), z((3, 2, 3))), "k and v of different lengths"),
           # one of k, v alone malformed, in an append that needs a new block: checked before it is taken
           ("append", (1, z((4, 2, 3)), z((4, 3, 3))), "v alone with 3 kv heads"),
           ("append", (1, z((4, 2, 3)), z((4, 2, 4))), "v alone with head_dim 4"),
           ("append", (1, z((4, 2, 3)), z((4, 2, 2))), "v alone with head_dim 2"),
           # shapes numpy broadcasts into the pool's slots: a write that checks nothing still succeeds
           ("append", (1, z((4, 2, 3)), z((4, 2, 1))), "v alone with head_dim 1"),
           ("append", (1, z((4, 2, 3)), z((4, 1, 3))), "v alone with 1 kv head"),
           ("append", (1, z((4, 3, 3)), z((4, 2, 3))), "k alone with 3 kv heads"),
           ("append", (1, z((4, 2, 4)), z((4, 2, 3))), "k alone with head_dim 4"),
           ("append", (1, z((2, 6)), z((2, 6))), "2-D k and v"),
           ("fork", (9, 2), "an unknown parent"),
           ("fork", (1, 1), "a child id already in use"),
           ("free", (9,), "an unknown sequence"),
           ("seq_len", (9,), "an unknown sequence"),
           ("block_table", (9,), "an unknown sequence")]
    attention = [(9, z((1, 6, 3)), "an unknown sequence"), (1, z((1, 5, 3)), "Hq = 5 over 2 kv heads"),
                 (1, z((1, 6, 4)), "head_dim 4, not 3"), (1, z((0, 6, 3)), "T = 0"),
                 (1, z((8, 6, 3)), "T = 8 > seq_len = 7"), (1, z((1, 6)), "a 2-D q"),
                 (1, z((1, 0, 3)), "Hq = 0 (no positive multiple of 2 kv heads)")]
    attend = run.ex.candidate.call
    return ([(partial(run.cache.call, method, *args), f"{method}(...) with {what}") for method, args, what in bad]
            + [(partial(attend, "paged_attention", run.cache, seq_id, q),
                f"paged_attention(cache, {seq_id}, q {list(q.shape)}) with {what}") for seq_id, q, what in attention])


def _rejected_calls_run(ex):
    run = Run(ex, 20, 5, 2, 3, group=3)
    run.add(1)
    run.append(1, 7)
    return run


def check_rejects_invalid_arguments(ex):
    """Unknown or reused ids, wrong shapes (v alone of another width or head count, numpy-broadcastable ones
    included), Hq % Hkv != 0, T out of range: ValueError, nothing changed."""
    for sizes in [(0, 4, 1, 2), (3, 0, 1, 2), (3, 4, 0, 2), (3, 4, 1, 0), (-1, 4, 1, 2), (3, 2.5, 1, 2)]:
        expect_rejected(ex, ex.candidate.call, "PagedKVCache", *sizes, call=f"PagedKVCache{sizes}",
                        diagnosis=INVALID, why=REJECTED, case={"sizes": sizes})
    run = _rejected_calls_run(ex)
    for call, what in _bad_calls(run):
        before = _state_snapshot(run)
        expect_rejected(ex, call, call=f"{what}", diagnosis=INVALID, why=REJECTED, case=run.case())
        _expect_unchanged(run, before, what)
    run.free(1)
    run.add(1)  # a freed id is free again


def check_attention_after_rejected_calls(ex):
    """After every invalid call, whatever each did, attention over the cache's sequences is still right."""
    run = _rejected_calls_run(ex)
    if not all_refused(_bad_calls(run)):
        return  # an accepted invalid call may change the cache: rejects_invalid_arguments judges that
    run.attend_all()
    run.failures = [replace(f, after="every rejected call") for f in run.failures]
    run.finish()


def _expect_unchanged(run, before, what):
    try:
        after = _state_snapshot(run)
    except CheckFailure as exc:  # the cache no longer reads as the sequences it held
        fail(f"the rejected call ({what}) changed the cache: then {exc}", run.case(), kind="hygiene")
    if after != before:
        fail(f"the rejected call ({what}) changed the cache", run.case(), kind="hygiene")
