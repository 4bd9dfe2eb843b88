"""Hidden checks for paged_kv_cache. Each ``check_*`` is one stable check id (without the prefix).

Lifecycle checks drive the candidate's cache and the oracle's token histories with the same
operations (add, append in chunks, fork, free) and, after every operation, read every live
sequence back through the fixed layout (``block_table`` + the pools) and compare it with its
history; paged_attention is compared with dense attention over the history. Attention checks
also run on a layout the grader builds and lends (shuffled tables, leftovers in every unused
slot), so they show what paged_attention reads through the table and nothing else.
"""
from __future__ import annotations

import math

import numpy as np

from grader.checking import expect_array, expect_rejected, fail, odd_size_closed, summarize
from grader.sandbox import CandidateRaised, Lent

from . import diagnosis, oracle
from .diagnosis import Failure, Layout

INVALID = "accepts_invalid_arguments"  # the diagnosis for an invalid call that raised no ValueError




def _tokens(T):
    return f"{T} token" if T == 1 else f"{T} tokens"


def _is_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class Run:
    """A candidate cache and the oracle's histories, driven by the same operations."""

    def __init__(self, ex, num_blocks, block_size, num_kv_heads, head_dim, group=1):
        self.ex, self.rng = ex, ex.rng
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
        self.cache.call("add_sequence", seq_id)
        self.model.add(seq_id)
        self._did(f"add_sequence({seq_id})")

    def append(self, seq_id, T, dtype=np.float64):
        k, v = (self.rng.standard_normal((T, *self.sizes[2:])).astype(dtype) for _ in range(2))
        self.cache.call("append", seq_id, k, v)
        self.model.append(seq_id, k.astype(np.float64), v.astype(np.float64))
        self._did(f"append({seq_id}, {_tokens(T)}{', float32' if dtype == np.float32 else ''})")

    def fork(self, parent, child):
        self.cache.call("fork", parent, child)
        self.model.fork(parent, child)
        self._did(f"fork({parent}, {child})")

    def free(self, seq_id):
        tables_before = dict(self.layout.tables)
        self.cache.call("free", seq_id)
        self.model.free(seq_id)
        self._did(f"free({seq_id})", freed=seq_id, tables_before=tables_before)

    def _did(self, op, **free_info):
        self.ops.append(op)
        self.layout = self.expect_state(f"after {op}", **free_info)

    # -- what the cache holds -----------------------------------------------------------------

    def read_layout(self, after) -> Layout:
        nb, bs, Hkv, D = self.sizes
        case = self.case()
        pools = [expect_array(getattr(self.cache, name), call=f"cache.{name} {after}", shape=self.sizes,
                              kind="f", case=case) for name in ("key_pool", "value_pool")]
        layout = Layout(bs, *pools)
        for s in self.model.live():
            L = self.cache.call("seq_len", s)
            if not _is_int(L) or L != self.model.length(s):
                fail(f"seq_len({s}) is {summarize(L)} {after}; expected {self.model.length(s)}", case,
                     kind="corrupt")
            table = expect_array(self.cache.call("block_table", s), call=f"block_table({s}) {after}",
                                 shape=(math.ceil(L / bs),), kind="iu", case=case)
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
            self.ex.diagnose("fork_without_copy_on_write", sentence)
            message += f"; {sentence}"
        fail(message, self.case(), kind="corrupt")

    def _expect_free_count(self, layout, after, freed, tables_before):
        got = self.cache.call("num_free_blocks")
        held = {int(b) for t in layout.tables.values() for b in t}
        expected = self.sizes[0] - len(held)
        if _is_int(got) and got == expected:
            return
        message = (f"num_free_blocks() is {summarize(got)} {after}; the live sequences' tables hold "
                   f"{len(held)} distinct blocks of {self.sizes[0]}, so {expected} should be free")
        found = None
        if _is_int(got) and got < expected:
            found = ("blocks_leaked", f"{expected - got} block(s) that no live sequence holds are not free "
                                      f"{after}: a block must return to the pool when its last holder lets go")
        elif _is_int(got) and freed is not None:
            sentence = diagnosis.returned_shared_blocks(freed, tables_before, layout, got, expected)
            found = ("free_ignores_sharing", sentence) if sentence else None
        if found:
            self.ex.diagnose(*found)
            message += f"; {found[1]}"
        fail(message, self.case(), kind="corrupt")

    # -- attention ----------------------------------------------------------------------------

    def attend(self, seq_id, T=None, dtype=np.float64):
        """paged_attention for the last T tokens of ``seq_id`` (T random when None); a wrong
        output is kept in ``failures`` and reported by :meth:`finish`."""
        L = self.model.length(seq_id)
        if T is None:
            T = 1 if self.rng.random() < 0.4 else int(self.rng.integers(1, min(L, 9) + 1))
        q = self.rng.standard_normal((T, self.num_q_heads, self.sizes[3])).astype(dtype)
        got = expect_array(self.ex.candidate.call("paged_attention", self.cache, seq_id, q),
                           call=f"paged_attention(cache, {seq_id}, q [{T}, {self.num_q_heads}, {self.sizes[3]}])",
                           shape=q.shape, kind="f", case=self.case())
        q = q.astype(np.float64)  # float32 queries are exact in float64; the output is float64
        want = oracle.attention(self.model.keys[seq_id], self.model.values[seq_id], q)
        if not diagnosis.close(got, want):
            self.failures.append(Failure(self.layout, seq_id, q, got, want, self.ops[-1]))

    def attend_all(self):
        for s in self.model.live():
            if self.model.length(s):
                self.attend(s)

    def finish(self):
        report_attention(self.ex, self.failures, self.case())


def report_attention(ex, failures: list[Failure], case=None):
    """Fail on the smallest wrong paged_attention output, naming the mistakes that explain all."""
    if not failures:
        return
    f = min(failures, key=lambda x: x.size)
    T, Hq, D = f.q.shape
    L = f.layout.lens[f.seq_id]
    error = np.nan_to_num(np.abs(f.got - f.want), nan=np.inf).max(axis=2)  # [T, Hq]
    i, h = (int(x) for x in np.argwhere(error > diagnosis.TOLERANCE)[0])
    where = f" after {f.after}" if f.after else " (on a layout the grader built, tables shuffled)"
    message = (f"paged_attention(cache, {f.seq_id}, q [{T}, {Hq}, {D}]){where}: query {i} (position "
               f"{L - T + i} of {L}), head {h} differs from dense attention over the sequence's own tokens "
               f"by up to {float(error.max()):.3g}; {len(failures)} call(s) were wrong")
    if not np.isfinite(f.got).all():
        message += "; some outputs are NaN or infinite"
    found = diagnosis.explain(failures)
    for diagnosis_id, sentence in found:
        ex.diagnose(diagnosis_id, sentence)
    if found:
        message += "".join(f"; {sentence}" for _, sentence in found)
    elif here := diagnosis.explain([f]):  # this case alone fits, the others do not: no name
        message += f"; consistent with {' and '.join(i for i, _ in here)} in this case, but not in the others"
    kind = "nan" if not np.isfinite(f.got).all() else "wrong"
    fail(message, dict(f.case or case, seq_id=int(f.seq_id), T=T, seq_len=int(L)), kind=kind)


# -- a layout the grader builds and lends -------------------------------------------------------


class LentLayout(Lent):
    """A paged layout held by the grader: paged_attention may read it only as the contract says."""

    wire_type, wire_methods = "PagedLayout", ("seq_len", "block_table", "num_free_blocks")

    def __init__(self, layout: Layout, num_free: int):
        self.layout, self.num_free = layout, num_free

    def wire_attrs(self) -> dict:
        nb, bs, Hkv, D = self.layout.key_pool.shape
        return {"key_pool": self.layout.key_pool, "value_pool": self.layout.value_pool,
                "num_blocks": nb, "block_size": bs, "num_kv_heads": Hkv, "head_dim": D}

    def _seq(self, seq_id):
        if not _is_int(seq_id) or int(seq_id) not in self.layout.lens:
            raise ValueError(f"unknown sequence {seq_id!r}")
        return int(seq_id)

    def seq_len(self, seq_id):
        return self.layout.lens[self._seq(seq_id)]

    def block_table(self, seq_id):
        return self.layout.tables[self._seq(seq_id)].copy()

    def num_free_blocks(self):
        return self.num_free


def lent_layout(rng, lens, block_size, num_kv_heads, head_dim) -> tuple[Layout, int]:
    """Sequences of the given lengths on shuffled blocks; every slot holds random data, so the
    slots after a sequence's last token hold leftovers. (layout, free blocks)."""
    counts = [math.ceil(L / block_size) for L in lens]
    used = sum(counts)
    spare = max(counts) + int(rng.integers(0, 3))  # reading from a first block onward stays in the pool
    shape = (used + spare, block_size, num_kv_heads, head_dim)
    layout = Layout(block_size, rng.standard_normal(shape), rng.standard_normal(shape))
    order, start = rng.permutation(used), 0
    ids = rng.choice(np.arange(1, 1000), size=len(lens), replace=False)
    for seq_id, L, n in zip(ids, lens, counts):
        layout.tables[int(seq_id)], layout.lens[int(seq_id)] = order[start:start + n].astype(np.int64), L
        start += n
    return layout, spare


def expect_lent_cases(ex, cases):
    """cases: (lens, block_size, Hkv, group, D, [(seq index, T)]): compare every call with the oracle."""
    failures = []
    for lens, bs, Hkv, group, D, calls in cases:
        layout, spare = lent_layout(ex.rng, lens, bs, Hkv, D)
        ids = list(layout.lens)
        case = {"block_size": bs, "num_kv_heads": Hkv, "query_heads": Hkv * group, "head_dim": D,
                "seq_lens": [layout.lens[s] for s in ids], "seed": ex.seed}
        for index, T in calls:
            s = ids[index]
            q = ex.rng.standard_normal((T, Hkv * group, D))
            call = f"paged_attention(layout, {s}, q [{T}, {Hkv * group}, {D}])"
            got = expect_array(ex.candidate.call("paged_attention", LentLayout(layout, spare), s, q),
                               call=call, shape=q.shape, kind="f", case=case)
            keys, values = layout.gather(s)
            want = oracle.attention(keys, values, q)
            if not diagnosis.close(got, want):
                failures.append(Failure(layout, s, q, got, want, case=case))
    report_attention(ex, failures)


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


def check_single_sequence(ex):
    """One sequence appended in chunks (T = 1, T > 1, T = 0, float32, across block boundaries), read back after each."""
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


def _interleaved(run, ids, rounds):
    rng = run.rng
    for _ in range(rounds):
        for s in rng.permutation(ids):
            run.append(int(s), 1 if rng.random() < 0.3 else int(rng.integers(2, 3 * run.block_size)))
        run.attend_all()


def check_interleaved_sequences(ex):
    """Many sequences appended in interleaved chunks (their blocks are not consecutive), read back after each."""
    rng = ex.rng
    for bs, Hkv, group in ((7, 3, 3), (13, 1, 5)):
        ids = [int(x) for x in rng.choice(np.arange(1, 500), size=5, replace=False)]
        run = Run(ex, odd_size_closed(rng, 140, 200), bs, Hkv, odd_size_closed(rng, 3, 11), group)
        for s in ids:
            run.add(s)
        _interleaved(run, ids, 4)
        run.finish()


def check_free_and_reuse(ex):
    """Sequences freed in random order; new ones (reused ids too) get the freed blocks, leftovers and all."""
    rng = ex.rng
    for bs, Hkv, group in ((7, 3, 5), (13, 2, 3)):
        run = Run(ex, odd_size_closed(rng, 60, 90), bs, Hkv, odd_size_closed(rng, 3, 9), group)
        ids = list(range(6))
        for s in ids:
            run.add(s)
        _interleaved(run, ids, 2)
        for s in rng.permutation([0, *rng.choice(ids[1:], size=3, replace=False)]):
            run.free(int(s))
        fresh = [0, 100, 101]  # 0 is an id used before
        for s in fresh:
            run.add(s)
        for _ in range(3):  # short appends: last blocks partly filled over old data
            for s in fresh:
                run.append(s, int(rng.integers(1, bs)))
            run.attend_all()
        run.finish()


def _fork_tree(run, root, depth):
    """Fork a chain ``depth`` deep from ``root``, with appends between; returns the new ids."""
    rng, made, parent = run.rng, [], root
    for n in range(depth):
        child = root * 100 + n + 1
        run.fork(parent, child)
        made.append(child)
        run.append(parent, int(rng.integers(1, run.block_size + 2)))
        parent = child if rng.random() < 0.7 else parent
    return made


def check_forks_and_appends(ex):
    """Forks several deep (of empty and full-block sequences too), appends to parents and children in turns."""
    rng = ex.rng
    for bs, Hkv, group in ((7, 1, 3), (13, 3, 5)):
        run = Run(ex, odd_size_closed(rng, 150, 200), bs, Hkv, odd_size_closed(rng, 3, 9), group)
        run.add(1)
        run.append(1, int(rng.integers(bs + 1, 3 * bs)) | 1)
        family = [1] + _fork_tree(run, 1, 4)
        for _ in range(3):
            for s in rng.permutation(family):
                run.append(int(s), 1 if rng.random() < 0.5 else int(rng.integers(2, bs + 3)))
            run.attend_all()
        for s in rng.permutation(family)[:2]:
            run.free(int(s))
        run.attend_all()
        run.add(9)  # an empty sequence forks too; a fork at a block boundary shares only full blocks
        run.fork(9, 10)
        run.append(10, bs), run.append(9, 2)
        run.fork(10, 11)
        run.append(11, 1), run.append(10, 1)
        run.attend_all()
        run.finish()


def check_free_counts_after_fork_and_free(ex):
    """num_free_blocks after forks and frees in random order: a shared block returns only with its last holder."""
    rng = ex.rng
    for bs in (7, 13):
        run = Run(ex, odd_size_closed(rng, 80, 120), bs, 2, odd_size_closed(rng, 3, 7))
        run.add(5)
        run.append(5, 3 * bs + int(rng.integers(1, bs)))
        family = [5] + _fork_tree(run, 5, 3)
        run.fork(family[-1], 77)
        family.append(77)
        for s in rng.permutation(family):
            run.free(int(s))  # after the last one, every block is free again
        run.add(5)  # an id may be added again after free
        run.append(5, bs + 2)
        run.attend(5)
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


def check_long_sequence(ex):
    """A sequence past 2^16 tokens between a short one, appended in large chunks; read back and attended."""
    rng = ex.rng
    bs, total = 13, 70_000 + odd_size_closed(rng, 3, 2000)
    chunks = [1, 29_999, 3, 20_011]
    chunks.append(total - sum(chunks))
    run = Run(ex, math.ceil(total / bs) + 12, bs, 1, 3, group=3)
    run.add(0), run.add(1)
    for n, T in enumerate(chunks):
        run.append(0, T)
        if n < 3:
            run.append(1, 5)
    run.attend(0, 1), run.attend(0, 3), run.attend(1, 3)
    run.finish()


def check_numpy_integer_arguments(ex):
    """Sizes and sequence ids given as numpy integers (np.int64) work everywhere."""
    i = np.int64
    try:
        run = Run(ex, i(50), i(7), i(3), i(5), group=5)
        run.add(i(11)), run.add(i(12))
        run.append(i(11), 9), run.append(i(12), 16), run.fork(i(11), i(13)), run.append(i(13), 3)
        run.free(i(12))
        run.attend(i(13), 2), run.attend(i(11), 1)
    except CandidateRaised as exc:
        if exc.is_a("ValueError"):
            fail(f"a numpy integer was rejected: {exc}; wherever an int is asked for, np.int64 works too",
                 {"seed": ex.seed}, kind="hygiene")
        raise
    run.finish()


# -- checks: paged_attention on the grader's layout -----------------------------------------------


def check_attention_gqa_groups(ex):
    """paged_attention with groups of 3 and 5 query heads per kv head, block sizes 7 and 13, T = 1 and T > 1."""
    rng, cases = ex.rng, []
    for bs, Hkv, group in ((7, 3, 3), (13, 1, 5), (7, 3, 5), (13, 5, 3), (7, 2, 1)):
        lens = _lens(rng, 3, bs)
        cases.append((lens, bs, Hkv, group, odd_size_closed(rng, 3, 17), _lent_calls(rng, lens)))
    expect_lent_cases(ex, cases)


def check_attention_edges(ex):
    """T = seq_len, a single token, lengths that fill whole blocks, block size 1, one block per sequence."""
    rng, cases = ex.rng, []
    for bs, Hkv, group in ((7, 1, 3), (13, 3, 1), (1, 2, 3)):
        lens = [1, bs, 2 * bs, 2 * bs + 1, int(rng.integers(2, bs + 2))]
        calls = [(n, L) for n, L in enumerate(lens)] + [(n, 1) for n in range(len(lens))]
        cases.append((lens, bs, Hkv, group, odd_size_closed(rng, 3, 9), calls))
    expect_lent_cases(ex, cases)


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
    """fork takes no block, and after appends in turns the cache holds the fewest blocks copy-on-write allows."""
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
             "the parent is freed the child's last block takes tokens in its free slots", {"seed": ex.seed},
             kind="efficiency")


def _state_snapshot(run):
    layout = run.read_layout("")
    return ({s: t.tolist() for s, t in layout.tables.items()}, dict(layout.lens),
            run.cache.call("num_free_blocks"), layout.key_pool.copy())


REJECTED = "an invalid call must say what is wrong and leave the cache as it was"


def check_rejects_invalid_arguments(ex):
    """Unknown or reused ids, wrong shapes, Hq % Hkv != 0, T out of range: ValueError, nothing changed."""
    for sizes in [(0, 4, 1, 2), (3, 0, 1, 2), (3, 4, 0, 2), (3, 4, 1, 0), (-1, 4, 1, 2)]:
        expect_rejected(ex, ex.candidate.call, "PagedKVCache", *sizes, call=f"PagedKVCache{sizes}",
                        diagnosis=INVALID, why=REJECTED, case={"sizes": sizes})
    run = Run(ex, 20, 5, 2, 3, group=3)
    run.add(1)
    run.append(1, 7)
    z = np.zeros
    bad = [("add_sequence", (1,), "an id already in use"),
           ("append", (9, z((2, 2, 3)), z((2, 2, 3))), "an unknown sequence"),
           ("append", (1, z((2, 3, 3)), z((2, 3, 3))), "k, v with 3 kv heads, not 2"),
           ("append", (1, z((2, 2, 4)), z((2, 2, 4))), "k, v with head_dim 4, not 3"),
           ("append", (1, z((2, 2, 3)), z((3, 2, 3))), "k and v of different lengths"),
           ("append", (1, z((2, 6)), z((2, 6))), "2-D k and v"),
           ("fork", (9, 2), "an unknown parent"),
           ("fork", (1, 1), "a child id already in use"),
           ("free", (9,), "an unknown sequence"),
           ("seq_len", (9,), "an unknown sequence"),
           ("block_table", (9,), "an unknown sequence")]
    for method, args, what in bad:
        before = _state_snapshot(run)
        expect_rejected(ex, run.cache.call, method, *args, call=f"{method}(...) with {what}",
                        diagnosis=INVALID, why=REJECTED, case=run.case())
        _expect_unchanged(run, before, f"{method} with {what}")
    attention = [(9, z((1, 6, 3)), "an unknown sequence"), (1, z((1, 5, 3)), "Hq = 5 over 2 kv heads"),
                 (1, z((1, 6, 4)), "head_dim 4, not 3"), (1, z((0, 6, 3)), "T = 0"),
                 (1, z((8, 6, 3)), "T = 8 > seq_len = 7"), (1, z((1, 6)), "a 2-D q")]
    for seq_id, q, what in attention:
        before = _state_snapshot(run)
        expect_rejected(ex, ex.candidate.call, "paged_attention", run.cache, seq_id, q,
                        call=f"paged_attention(cache, {seq_id}, q {list(q.shape)}) with {what}",
                        diagnosis=INVALID, why=REJECTED, case=run.case())
        _expect_unchanged(run, before, f"paged_attention with {what}")
    run.free(1)
    run.add(1)  # a freed id is free again


def _expect_unchanged(run, before, what):
    after = _state_snapshot(run)
    same = (after[0] == before[0] and after[1] == before[1] and after[2] == before[2]
            and np.array_equal(after[3], before[3]))
    if not same:
        fail(f"the rejected call ({what}) changed the cache", run.case(), kind="hygiene")
