"""Hidden checks for prefix_cache. Each ``check_*`` is one stable check id (without the prefix).

Written from the contract (CONTRACT.md section 1, ``### prefix_cache``), not from known mistakes:
random operation sequences (``grader.stateful``) drive the candidate's ``PrefixCache`` and the
oracle's model side by side, and after every operation compare everything observable: the
operation's outcome (value, or ValueError / RuntimeError), ``num_free_blocks``,
``num_cached_blocks``, and every live sequence's ``num_tokens`` and ``block_table``. The free
queue's order and the registrations are not read directly; every later block id and hit
depends on them. Prompts come from a small pool of shared prefixes, themselves made of a few
block contents, so hits, evictions, re-registrations and equal blocks after different prefixes
happen in most sequences. The first failing sequence is shrunk (bounded replays) and shown; a
mistake is named when it explains every failing sequence of the check (``diagnosis``).

Contract sentence -> check ("sequences" = random_operation_sequences, eviction_under_pressure,
whole_cached_prompts, out_of_blocks, big_prompts, integer_types, keeps_its_own_prompt, which all
compare every observable after every operation):

| sentence | check |
|---|---|
| blocks 0 .. num_blocks - 1; the queue starts 0, 1, ...; taken from its front | fresh_cache, sequences |
| returned to its back; taking a registered block evicts it (add_request, append_token) | sequences |
| full at block_size tokens; h_j = block_hash(h_{j-1}, block j), h_{-1} = None | sequences (same block, other parent) |
| add_request serves the longest run of leading full registered blocks | sequences, whole_cached_prompts |
| never the prompt's last token (k full registered blocks hit k - 1) | whole_cached_prompts |
| a hit gains a holder; one with no holder leaves the queue wherever it stands | eviction_under_pressure |
| then the other blocks from the front, then the new full blocks registered, in order | sequences |
| returns hit blocks x block_size | sequences (every add_request's value) |
| RuntimeError when the queue less its waiting hits is short; nothing changes | out_of_blocks |
| a block that becomes full is registered unless its hash is; only full blocks | whole_cached_prompts, sequences |
| append_token writes at num_tokens, takes a block when the last is full, else RuntimeError | out_of_blocks |
| free: one holder less per block; the last block first to the queue's back | eviction_under_pressure |
| registered until taken, even when no prompt can reach it | eviction_under_pressure (num_cached_blocks) |
| validation first: bad ids, empty prompt, negative token, sizes < 1: ValueError | rejects_invalid_arguments |
| ... and nothing changed | rejected_calls_change_nothing |
| (public tests) the invalid call they show raises ValueError, in a live grading too | rejects_the_invalid_case_shown |
| a seq_id any int, a token any int >= 0; an id added again after free | sequences (ids to ±2^62, tokens to 2^40) |
| numpy integers as ints; prompts as list, tuple, 1-D array of any signed dtype | integer_types |
| the cache keeps its own copy of the prompt; arguments unchanged (section 1) | keeps_its_own_prompt |
| block_table: int64 [ceil(num_tokens / block_size)]; a returned array is the caller's | sequences |
| sizes as large as memory allows (section 1) | big_prompts (a pool past 2^16 blocks), many_holders |

Not held by any check: "no check depends on a collision" (a promise to the candidate), and
"Bools, floats and strings ... are outside the contract".
"""
from __future__ import annotations

import numpy as np

from grader.checking import SHOWN, describe, expect_rejected, fail, name_mistakes, past_int64
from grader.checking.drawn import odd_size_closed, seq_ids
from grader.stateful import Op, describe_ops, shrink

from . import diagnosis, oracle

INVALID = "accepts_invalid_arguments"
MAX_FAILURES = 4  # failing sequences judged together for a diagnosis; the first is shrunk and shown
SCRIBBLE = -7  # what the kit's driver writes into every writable table it is handed (prefix_driver.py)
SHOWN_BLOCKS = 32  # a block table longer than this is shown from its first difference on
IDS = 12  # live sequences at most, with ids drawn per sequence (drawn.seq_ids; past int64: integer_types)


# -- the candidate's side ----------------------------------------------------------------------------


def _plain(value, slips=None, what=""):
    """An int answer as an int, anything else as its description (which no model value equals). A
    whole float is the right value in another type: a slip noted in ``slips``, judged as the int."""
    if oracle.is_int(value):
        return int(value)
    if slips is not None and isinstance(value, (float, np.floating)) and float(value).is_integer():
        slips.append(f"{what} returned {value!r}, a float; expected an int")
        return int(value)
    return f"<{describe(value)}>"


def _outcome(reply):
    """The model's form of a driver outcome: ("ok", value) or ("raises", kind), and the message.
    ValueError and RuntimeError are kinds whatever their subclass; other exceptions keep their name."""
    if reply[0] == "ok":
        return ("ok", reply[1]), ""
    mro = list(reply[1])
    kind = next((k for k in ("ValueError", "RuntimeError") if k in mro), mro[0] if mro else "?")
    return ("raises", kind), str(reply[2])


class Driver:
    """A candidate cache, driven through the kit's ``prefix_driver`` in the candidate's process: one
    round trip per operation, returning its outcome and every observable after it."""

    def __init__(self, ex, sizes, typed=False):
        self.module = ex.helper("prefix_driver")
        self.cache = ex.candidate.call("PrefixCache", *(map(narrowest, sizes) if typed else sizes))
        self.slips: list[str] = []  # right values in the wrong container (hygiene)
        self.steps, self.prompts = 0, []  # operations sent; the add_request ones among them, in order
        self.changed: list[Op] = []  # those whose prompt a later call changed
        self.moved: list[tuple[int, int]] = []  # (operation index, seq id) of tables handed out that changed since

    def step(self, op, ids, live, overwrite=False):
        """(outcome, its message, observables) of ``op`` on the candidate, in the model's format."""
        reply = self.module.call("step", self.cache, op.name, list(op.args), list(ids), overwrite, not self.steps)
        self.steps += 1
        if op.name == "add_request":
            self.prompts.append(op)
        got, said = _outcome(reply[0])
        if op.name in ("append_token", "free") and got[0] == "ok":
            got = ("ok", None)  # these return nothing; whatever they return is not read
        elif got[0] == "ok":
            got = ("ok", _plain(got[1], self.slips, op.name))
        seqs = {}
        for s, tokens, table in reply[3]:
            tokens, _ = _outcome(tokens)
            if tokens[0] == "raises":  # gone: right for an id that is not live, else a wrong answer
                seqs[s] = None if s not in live or tokens[1] != "ValueError" else f"<raises {tokens[1]}>"
            else:
                seqs[s] = (_plain(tokens[1], self.slips, f"num_tokens({s})"), self._table(s, *_outcome(table)))
        # the driver's numbers are the candidate process's word: only ones naming a prompt sent count
        self.changed = [self.prompts[i] for i in reply[4] if type(i) is int and 0 <= i < len(self.prompts)]
        moved = reply[5] if len(reply) > 5 and isinstance(reply[5], list) else []
        self.moved = [(m[0], m[1]) for m in moved if isinstance(m, list) and len(m) == 2
                      and all(type(v) is int for v in m) and 0 <= m[0] < self.steps]
        counts = [_plain(_outcome(r)[0][1], self.slips, name) for r, name in
                  ((reply[1], "num_free_blocks"), (reply[2], "num_cached_blocks"))]
        seen = {"free": counts[0], "cached": counts[1], "seqs": seqs}
        return got, said, seen

    def _table(self, s, outcome, _said):
        if outcome[0] == "raises":
            return f"<raises {outcome[1]}>"
        table = outcome[1]
        if isinstance(table, np.ndarray) and table.ndim == 1 and table.dtype.kind in "iu":
            if table.dtype != np.int64:
                self.slips.append(f"block_table({s}) returned a {table.dtype} array; expected int64")
            return [int(b) for b in table]
        if isinstance(table, (list, tuple)) and all(oracle.is_int(b) for b in table):
            self.slips.append(f"block_table({s}) returned {describe(table)}; expected an int64 array")
            return [int(b) for b in table]
        return f"<{describe(table)}>"


# -- one sequence, played on both sides ----------------------------------------------------------------


class Failure:
    def __init__(self, sizes, ops, trace, message, kind, observed=True):
        self.sizes, self.ops, self.trace, self.message, self.kind = sizes, ops, trace, message, kind
        self.observed = observed  # an observable differed (False: a table handed out changed later)

    @property
    def case(self):
        nb, bs = self.sizes
        return {"num_blocks": nb, "block_size": bs, "operations": describe_ops(self.ops, limit=24)}

    def typed_case(self):
        """``case`` of a run whose sizes went to PrefixCache as the narrowest numpy ints that hold them."""
        return dict(self.case, sizes_sent_as=[type(narrowest(n)).__name__ for n in self.sizes])


def play(ex, sizes, ops, typed=False, overwrite=False, slips=None) -> Failure | None:
    """Build a fresh cache and model, apply ``ops``, compare after each; the first difference.
    A passing run adds its hygiene slips (containers, changed prompts) to ``slips``."""
    model, driver, trace = oracle.Model(*sizes), Driver(ex, sizes, typed), []
    for i, op in enumerate(ops):
        want = model.apply(op)
        if want == ("raises", "ValueError"):  # a cut made by shrinking: invalid calls are another check's
            return None
        ids = diagnosis.watched(model, op)
        got, said, seen = driver.step(op, ids, set(model.seqs), overwrite)
        trace.append((got, seen))
        expected = model.observe(ids)
        _lenient_reads(expected, seen, driver.slips)
        wrong = _difference(op, got, said, want, seen, expected, typed)
        moved = None if wrong else _moved(driver.moved)
        if wrong or moved:
            wrong = wrong or moved
            return Failure(sizes, ops[:i + 1], trace, f"operation {i + 1}, {op}: {wrong[0]}", wrong[1], not moved)
    slips = [] if slips is None else slips
    slips += driver.slips
    if driver.changed:
        slips.append(f"the prompt passed to {driver.changed[0]} was changed by a later call: the cache must keep "
                     "its own copy and leave the caller's unchanged")
    return None


def _lenient_reads(expected, seen, slips):
    """A sequence that is gone (freed, or never added) whose reads answer nothing, 0 tokens and an empty table,
    instead of raising ValueError: a validation slip (the sequence is gone all the same), kept in ``slips`` and
    taken as gone, where a sequence still there is corruption."""
    for s, value in expected["seqs"].items():
        got = seen["seqs"][s]
        if value is None and isinstance(got, tuple) and got[0] == 0 and got[1] == []:
            slips.append(f"num_tokens({s}) and block_table({s}) of a sequence that is gone answered 0 and an empty "
                         "table: an unknown seq_id raises ValueError")
            seen["seqs"][s] = None


def _difference(op, got, said, want, seen, expected, typed):
    """(message, kind) for the first observable that differs, or None."""
    if got != want:
        if typed and got[0] == "raises" and got[1] in ("ValueError", "TypeError") and want[0] == "ok":
            return ((f"{op.name} rejected a valid argument ({said[:100]}); numpy integers work as ints, and a prompt "
                    "may be a list, a tuple or a 1-D numpy integer array"), "hygiene")
        if got[0] == "raises" and got[1] not in ("ValueError", "RuntimeError"):
            return f"{op.name} raised {got[1]} ({said[:100]})", "crash"
        return f"{_said(op, got, said)}; expected {_said(op, want, '')}", "wrong"
    for key, call in (("free", "num_free_blocks()"), ("cached", "num_cached_blocks()")):
        if seen[key] != expected[key]:
            return f"then {call} is {seen[key]}; expected {expected[key]}", "corrupt"
    for s, value in expected["seqs"].items():
        if seen["seqs"][s] != value:
            return _sequence_difference(s, seen["seqs"][s], value), "corrupt"
    return None


def _moved(moved):
    """(message, kind) when a block table handed out at an earlier operation has changed since."""
    if moved:
        step, s = moved[0]
        return (f"then the block table of sequence {s} that block_table returned after operation {step + 1} had "
                "changed: a table handed out is the caller's, and no later call may change it (the cache handed "
                "out an array it keeps, or refills one output buffer)", "corrupt")
    return None


def _said(op, outcome, message):
    if outcome[0] == "raises":
        return f"it raised {outcome[1]}" + (f" ({message[:80]})" if message else "")
    return f"it returned {outcome[1]}" if op.name == "add_request" else "it returned normally"


def _sequence_difference(s, got, want):
    if want is None:
        return f"then sequence {s} is still there (num_tokens({s}) answers {got[0]}); expected ValueError"
    if got is None:
        return f"then num_tokens({s}) raised ValueError; sequence {s} should hold {want[0]} tokens"
    if not isinstance(got, tuple):
        return f"then num_tokens({s}) {got[1:-1]}; expected {want[0]}"
    if got[0] != want[0]:
        return f"then num_tokens({s}) is {got[0]}; expected {want[0]}"
    differ = [a for a, b in zip(got[1], want[1]) if a != b] if isinstance(got[1], list) else [None]
    scribbled = len(got[1]) == len(want[1]) and set(differ) == {SCRIBBLE}  # every difference is the grader's write
    return _table_difference(s, got[1], want[1]) + (
        f" ({SCRIBBLE} is what the grader wrote into a table block_table returned earlier: the array handed to "
        "the caller must not be the cache's own)" if scribbled else "")


def _table_difference(s, got, want) -> str:
    """What differs between two block tables, said in full when short, else from the first difference on."""
    if not isinstance(got, list) or max(len(got), len(want)) <= SHOWN_BLOCKS:
        return f"then block_table({s}) is {got}; expected {want}"
    i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return (f"then block_table({s}) holds {len(got)} blocks (expected {len(want)}), and from index {i} on it reads "
            f"{got[i:i + 8]}; expected {want[i:i + 8]}")


# -- many sequences, judged together ------------------------------------------------------------------


def expect_sequences(ex, runs, typed=False, overwrite=False):
    """runs: [(sizes, [ops, ...])]. Fail on the first failing sequence, shrunk, naming the mistakes
    that explain every failing sequence (at most ``MAX_FAILURES`` are played to the end)."""
    failures, slips, passes = [], [], []
    for sizes, sequences in [*runs, ((4, 2), list(WITNESSES.values()))]:
        for ops in sequences:
            found = play(ex, sizes, ops, typed, overwrite, slips)
            if found:
                failures.append(found)
            else:
                passes.append((sizes, tuple(ops)))
            if len(failures) >= MAX_FAILURES:
                break
        if len(failures) >= MAX_FAILURES:
            break
    if not failures:
        if slips:
            fail(f"{slips[0]} (the values are right)", kind="hygiene")
        return
    first = min(failures, key=lambda f: f.kind == "hygiene")  # a wrong answer outranks a slip
    def replay(ops):  # a shorter sequence counts when it fails at least as badly
        found = play(ex, first.sizes, ops, typed, overwrite)
        return found if found and (found.kind != "hygiene" or first.kind == "hygiene") else None

    _, shown = shrink(list(first.ops), first, replay)
    message = shown.message + (f"; {len(failures)} of the sequences tried went wrong" if len(failures) > 1 else "")
    if shown.kind in ("wrong", "corrupt") and shown.observed:  # the mistakes named explain observables
        cases = [((f.sizes, tuple(f.ops)), f.trace) for f in [shown, *(f for f in failures if f is not first)]
                 if f.kind in ("wrong", "corrupt") and f.observed]
        message += name_mistakes(ex, diagnosis.explain_sequences(cases, passes))
    fail(message, dict(shown.typed_case() if typed else shown.case, seed=ex.seed), kind=shown.kind)


# -- drawing operation sequences ------------------------------------------------------------------------


def _show(prompt) -> str:
    """A prompt as a report writes it: its container, and its tokens (the first few of a long one)."""
    values = np.asarray(prompt).tolist()
    kind = {list: "", tuple: "tuple "}.get(type(prompt), f"{getattr(prompt, 'dtype', '')} array ")
    shown = str(values) if len(values) <= 16 else f"[{len(values)} tokens: {', '.join(map(str, values[:6]))}, ...]"
    return kind + shown


def add(seq_id, prompt) -> Op:
    return Op("add_request", (seq_id, prompt), f"{seq_id!r}, {_show(prompt)}")


def append(seq_id, token) -> Op:
    return Op("append_token", (seq_id, token))


def free(seq_id) -> Op:
    return Op("free", (seq_id,))


WITNESSES = {  # for each mistake switch, a short sequence on PrefixCache(4, 2) whose last step shows it
    "unchained_hash": [add(1, [1, 2, 3, 4, 0]), free(1), add(2, [3, 4, 0])],
    "parent_from_registration": [add(1, [1, 2, 3]), add(2, [1, 2]), append(2, 3), append(2, 4), free(1),
                                 add(3, [3, 4, 0])],  # block 2 repeats (1, 2): unregistered
    "last_token_served": [add(1, [1, 2, 3, 4]), free(1), add(2, [1, 2, 3, 4])],
    "partial_block_cached": [add(1, [1, 2, 3])],
    "stale_registration": [add(1, [1, 2]), free(1), add(2, [7] * 8)],  # block 0 taken, (1, 2) still counted
    "stale_on_append": [add(1, [1, 2]), free(1), add(2, [5, 6, 7, 8, 9, 9]), append(2, 9)],  # append takes 0
    "lifo_eviction": [add(1, [1, 2]), add(2, [3, 4]), free(1), free(2), add(3, [5])],
    "head_first_free": [add(1, [1, 2, 3, 4]), free(1), add(2, [5] * 5)],
    "held_block_evicted": [add(1, [1, 2, 3]), free(1), add(2, [1, 2, 3])],  # the hit stays counted free
    "held_block_returned": [add(1, [1, 2, 3]), add(2, [1, 2, 4]), free(1)],
}
"""Played after every check's sequences: a candidate that passes one is not making that mistake,
so a diagnosis stays off a mistake whose witness passed (``diagnosis.explain_sequences``)."""


class Drawer:
    """Operation sequences over a small pool of shared prefixes, built from a few block contents."""

    def __init__(self, rng, sizes, vocab=6, contents=3, prefixes=3, longest=4):
        self.rng, (self.num_blocks, self.bs) = rng, sizes
        self.vocab, self.history = vocab, []
        blocks = [self.tokens(self.bs) for _ in range(contents)]
        self.prefixes = [[t for j in rng.integers(0, contents, int(rng.integers(1, longest + 1))) for t in blocks[j]]
                         for _ in range(prefixes)]

    def tokens(self, n, big=0.0) -> list:
        rng = self.rng
        return [int(rng.integers(2**20, 2**40)) if rng.random() < big else int(rng.integers(0, self.vocab))
                for _ in range(n)]

    def prompt(self) -> list:
        rng, bs = self.rng, self.bs
        base = list(self.prefixes[int(rng.integers(len(self.prefixes)))])
        r = rng.random()
        if r < 0.3:
            return base  # whole blocks, perhaps all registered
        if r < 0.55:
            return base + self.tokens(int(rng.integers(1, 2 * bs + 2)))
        if r < 0.75:
            return base[:int(rng.integers(1, len(base) + 1))]
        if r < 0.85:  # a prefix continued by another: equal blocks after different parents
            other = self.prefixes[int(rng.integers(len(self.prefixes)))]
            return base[:bs * int(rng.integers(0, len(base) // bs + 1))] + list(other)
        if r < 0.95 and self.history:  # the next turn of a chat: an earlier sequence, generated tokens too
            return list(self.history[int(rng.integers(len(self.history)))]) + self.tokens(int(rng.integers(1, bs + 2)))
        return self.tokens(int(rng.integers(1, 3 * bs + 1)))

    def sequence(self, length, p_add=0.4, p_free=0.25) -> list:
        rng, model, ops = self.rng, oracle.Model(self.num_blocks, self.bs), []
        ids = seq_ids(rng, IDS)
        while len(ops) < length:
            live, r = sorted(model.seqs), rng.random()
            if not live or r < p_add:
                idle = [s for s in ids if s not in model.seqs]
                new = [add(idle[int(rng.integers(len(idle)))], self.prompt())]
            elif r < 1 - p_free:
                s = live[int(rng.integers(len(live)))]
                new = [append(s, t) for t in self.tokens(int(rng.integers(1, self.bs + 2)), big=0.2)]
            else:
                new = [free(live[int(rng.integers(len(live)))])]
            for op in new:
                if op.name == "free":
                    self.history.append(model.seqs[op.args[0]]["tokens"])
                model.apply(op)
            ops += new
        return ops[:length]

    def chat(self, first, second, turns=2) -> list:
        """A conversation: each turn's prompt is the whole earlier turn, generated tokens too, plus
        new tokens, so blocks filled by append_token are served to the next turn."""
        rng, bs, ops = self.rng, self.bs, []
        tokens = self.prompt()
        for turn in range(turns):
            seq_id = (first, second)[turn % 2]
            ops.append(add(seq_id, list(tokens)))
            generated = self.tokens(int(rng.integers(bs, 2 * bs + 2)), big=0.5)
            ops += [append(seq_id, t) for t in generated]
            ops.append(free(seq_id))
            tokens = tokens + generated + self.tokens(int(rng.integers(1, bs + 1)))
        return ops


def _runs(ex, configs, count, length, **kwargs):
    runs = []
    for sizes in configs:
        drawer = Drawer(ex.rng, sizes, **kwargs.pop("drawer", {}))
        runs.append((sizes, [drawer.sequence(length, **kwargs) for _ in range(count)]))
    return runs


# -- checks -----------------------------------------------------------------------------------------------


def check_fresh_cache(ex):
    """A new cache: every block free, none cached; one request and its free, for several sizes."""
    runs = []
    for nb, bs in ((1, 1), (3, 1), (5, 3), (int(ex.rng.integers(9, 40)), int(ex.rng.integers(2, 9)))):
        prompt = [int(t) for t in ex.rng.integers(0, 50, int(ex.rng.integers(1, nb * bs + 1)))]
        runs.append(((nb, bs), [[add(3, prompt), free(3), add(3, prompt), append(3, 7), free(3)]]))
    expect_sequences(ex, runs)


def check_random_operation_sequences(ex):
    """Random requests, token appends and frees over shared prefixes; every observable after every operation."""
    sizes = [(7, 2), (11, 3), (9, 4), (10, 1), (int(ex.rng.integers(12, 20)), int(ex.rng.integers(2, 6)))]
    runs = _runs(ex, sizes, count=3, length=28)
    for sizes, sequences in runs:
        drawer = Drawer(ex.rng, sizes)
        sequences.append(drawer.chat(5, -1, turns=3) + drawer.sequence(16))
    runs += [((24, bs), [_reborn(ex.rng, bs, short) for short in (True, False)]) for bs in (1, 2, 3)]
    expect_sequences(ex, runs)


def _reborn(rng, bs, short) -> list:
    """An id freed and added again, after a first life of at least one full block, with a prompt
    shorter than a block (``short``, for bs > 1) or not: nothing of its first life (chain hashes,
    tokens, blocks) may reach its second. It generates past a few blocks; then prompts continue its
    second life, or start with its second life's first block at position 0."""
    def tokens(n):
        return [int(t) for t in rng.integers(0, 1000, n)]

    first = tokens(int(rng.integers(bs, 3 * bs + 1)))
    second = tokens(int(rng.integers(1, bs)) if short and bs > 1 else int(rng.integers(1, 2 * bs + 1)))
    generated = tokens(2 * bs + int(rng.integers(0, bs + 1)))
    whole, head = second + generated, len(second) // bs * bs
    ops = [add(7, first), *(append(7, t) for t in tokens(int(rng.integers(0, bs + 1)))), free(7), add(7, second)]
    ops += [append(7, t) for t in generated]
    return ops + [add(8, whole + tokens(1)), free(7), add(9, whole[head:head + bs] + tokens(1)),
                  add(7, first + tokens(1))]


def check_whole_cached_prompts(ex):
    """Prompts of whole cached blocks, single tokens, block size 1, a chain with a gap: what is served, and what not."""
    runs = []
    for nb, bs in ((12, 1), (10, 2), (9, 3), (13, 5)):
        drawer = Drawer(ex.rng, (nb, bs), prefixes=2, longest=3)
        sequences = []
        for _ in range(3):
            a, b = drawer.prefixes
            ops = [add(1, a), add(2, list(a)), add(3, a + b[:1]), free(1), add(4, a[:bs] or a), free(2),
                   add(1, list(a)), append(1, a[0]), free(3), add(5, b), add(6, b[:1])]
            sequences.append(ops + drawer.sequence(14, p_add=0.5))
        runs.append(((nb, bs), sequences))
    runs += [((6, bs), [_gap(Drawer(ex.rng, (6, bs), vocab=1000))]) for bs in (2, 3)]
    runs += [(sizes, [ops]) for sizes, ops in (_twins(ex.rng, bs) for bs in (1, 2, 3, 4) for _ in range(3))]
    expect_sequences(ex, runs)


def _gap(drawer) -> list:
    """A chain whose middle block is evicted while the block after it stays registered (it was
    a copy that stayed unregistered): a later prompt may be served only the blocks before the gap."""
    a, b, c, bs = drawer.tokens(drawer.bs), drawer.tokens(drawer.bs), drawer.tokens(drawer.bs), drawer.bs
    return [add(1, a + b + [1]), add(2, a + b), *[append(2, t) for t in c], free(1), free(2),
            add(3, drawer.tokens(3 * bs)), free(3), add(4, a + b + c + [2])]


def _twins(rng, bs) -> tuple:
    """Two sequences with the same tokens, built side by side: the second's prompt may stop at a whole
    block (served all but that block, which then repeats a registered hash and stays unregistered),
    and both generate the rest in an interleaved order, so blocks filled by append_token repeat a
    registered hash, or follow a block that does. The chain must come from the tokens, never from a
    block's registration, and the first registration must stand. Then frees, evictions and prompts
    that continue the chain, or start with its generated blocks at position 0."""
    def tokens(n):
        return [int(t) for t in rng.integers(0, 1000, n)]

    k, r = int(rng.integers(1, 3)), int(rng.integers(0, bs))
    prompt, generated = tokens(k * bs + r), tokens(bs * int(rng.integers(2, 4)) + int(rng.integers(0, bs)))
    cut = k * bs if rng.random() < 0.6 else len(prompt)  # where the second prompt stops
    pending = {1: list(generated), 2: prompt[cut:] + generated}
    ops = [add(1, prompt), add(2, prompt[:cut])]
    while pending[1] or pending[2]:
        s = int(rng.choice([s for s in (1, 2) if pending[s]]))
        ops += [append(s, pending[s].pop(0)) for _ in range(int(rng.integers(1, bs + 1))) if pending[s]]
    whole = prompt + generated
    late = whole[k * bs:k * bs + bs * int(rng.integers(1, 3))]  # generated blocks, as a prompt of their own
    first = (1, 2) if rng.random() < 0.5 else (2, 1)
    ops += [add(3, whole + tokens(1)), free(3), free(first[0]), add(4, late + tokens(1)), free(first[1]), free(4)]
    sizes = (2 * -(-len(whole) // bs) + 4, bs)
    model = oracle.Model(*sizes)
    for op in ops:
        model.apply(op)
    evicting = tokens(bs * int(rng.integers(1, model.num_free_blocks() + 1)))  # takes some of the chain, or all
    return sizes, ops + [add(5, evicting), free(5), add(6, whole + tokens(2))]


def check_eviction_under_pressure(ex):
    """Few blocks, many frees: which cached blocks are evicted first, and which survive to be hit again."""
    runs = _runs(ex, [(5, 2), (6, 3), (4, 1), (8, 2)], count=3, length=32, p_add=0.45, p_free=0.35)
    runs += [((6, bs), [_evicted_by_its_own_takes(ex.rng, bs)]) for bs in (1, 2, 3)]
    expect_sequences(ex, runs)


def _evicted_by_its_own_takes(rng, bs) -> list:
    """A request whose own takes evict the registration of one of its new blocks' hashes: its chain's
    head was evicted (no hit), its middle block's hash is still registered on a freed block, and that
    block is among those the request takes. Registering after every take keeps the hash; registering
    while taking finds it held, skips it, then evicts it: the hash ends up nowhere."""
    x, y, z, w, v, u, t, q = ([int(n) for n in rng.integers(0, 1000, bs)] for _ in range(8))
    return [add(1, x), add(2, x), *(append(2, token) for token in y), add(3, w + v), add(4, u),
            free(1), free(3), free(2), add(5, t), add(6, x + y + z), free(6), add(7, x + y + q)]


def check_out_of_blocks(ex):
    """Prompts and appends needing more blocks than are free (waiting hits too): RuntimeError, nothing changed,
    and the caller may then reuse the refused prompt's list for another prompt."""
    runs = []
    for nb, bs in ((4, 2), (6, 3), (3, 1)):
        drawer = Drawer(ex.rng, (nb, bs), longest=nb)
        a = drawer.prefixes[0]
        fill = [add(1, a), free(1), add(2, a + drawer.tokens(nb * bs - len(a) + 1)),
                add(2, a + drawer.tokens(max(nb * bs - len(a), 1))), add(3, a[:1]), append(2, 1), append(3, 2)]
        runs.append(((nb, bs), [fill + drawer.sequence(20, p_add=0.55, p_free=0.2) for _ in range(3)]
                     + [_retried(ex.rng, nb, bs)]))
    expect_sequences(ex, runs, overwrite=True)


def _retried(rng, nb, bs) -> list:
    """A prompt refused for space, then, once blocks are free, another prompt of its length in the same
    list (the driver reuses it), then each of the two again: a refusal remembers nothing of the prompt."""
    refused, then = ([int(t) for t in rng.integers(0, 1000, bs * (nb // 2) + 1)] for _ in range(2))
    filler = [int(t) for t in rng.integers(1000, 2000, bs * (nb - nb // 2) + 1)]  # leaves too few blocks
    return [add(1, filler), add(2, refused), free(1), add(2, then), free(2), add(3, refused), free(3), add(4, then)]


def check_big_prompts(ex):
    """Prompts of thousands of tokens (ids and tokens up to 2^40) sharing a long prefix; block sizes 16 and 1."""
    rng, runs = ex.rng, []
    for bs, length in ((16, 5000 + int(rng.integers(1, 15))), (1, 1500 + int(rng.integers(0, 9)))):
        shared = [int(t) for t in rng.integers(0, 2**40, length)]
        tail = [int(t) for t in rng.integers(0, 50_000, 3 * bs + 1)]
        nb = (2 * length + 8 * bs) // bs + 2
        ops = [add(2**40, shared), add(-5, shared[:length // 2] + tail), append(-5, 2**40 - 1), free(2**40),
               add(7, shared + tail), add(2**40, shared[:bs * 3]), free(-5), free(7), add(-5, shared)]
        runs.append(((nb, bs), [ops]))
    # a pool past 2^16 blocks, whose ids a 16-bit table cannot hold: one prompt takes the first 2^16 + 3, and once
    # it is freed, the queue hands out the blocks past them first
    nb, first = 2**16 + odd_size_closed(rng, 500, 3000), 2**16 + 3
    late = [[int(t) for t in rng.integers(0, 2**40, n)] for n in (9, 7)]
    runs.append(((nb, 1), [[add(1, [int(t) for t in rng.integers(0, 2**40, first)]), free(1), add(2, late[0]),
                            add(3, late[1]), append(2, 5), free(2), add(4, late[0] + [6]), free(3), free(4)]]))
    expect_sequences(ex, runs)


def check_many_holders(ex):
    """A block held by 257 requests at once (more than an 8-bit count holds: 257 reads 1 in uint8): each is
    served the block, and it leaves no holder behind until the last request that holds it is freed. Not 65537
    (past 16 bits): every holder is a live request with a block of its own in the queue first, and a correct
    answer whose queue is a plain list (O(n) per take) spends about 35 s there."""
    holders, token = 2**8 + 1, int(ex.rng.integers(0, 2**40))
    prompt = [token, token + 1]  # the first block is served to every request after the first; each takes one block
    cache = ex.candidate.call("PrefixCache", holders + 3, 1)
    builtins, itertools = ex.helper("builtins"), ex.helper("itertools")
    ids = builtins.range(1, holders + 1)
    served = builtins.sum(builtins.map(cache.add_request, ids, itertools.repeat(prompt)))
    counts = [(f"num_free_blocks() after {holders} requests of the same 2 tokens", cache.call("num_free_blocks"), 2),
              ("num_cached_blocks()", cache.call("num_cached_blocks"), 2)]
    cache.call("free", 1)  # the first block keeps its other holders
    counts.append(("num_free_blocks() after free(1)", cache.call("num_free_blocks"), 3))
    ex.helper("collections").deque(builtins.map(cache.free, builtins.range(2, holders + 1)), maxlen=0)
    counts.append(("num_free_blocks() once every request is freed", cache.call("num_free_blocks"), holders + 3))
    counts.append(("add_request(0, the same tokens) then", cache.call("add_request", 0, prompt), 1))
    wrong = [f"{what} is {got!r}; expected {want}" for what, got, want in
             [("the tokens served in all", served, holders - 1), *counts] if got != want]
    if wrong:
        fail(f"PrefixCache({holders + 3}, 1), {holders} requests of the tokens {prompt}: {'; '.join(wrong[:2])} (a "
             "holder count kept in 8 bits wraps)", {"seed": ex.seed}, kind="corrupt")


def check_integer_types(ex):
    """Prompts as tuples, lists and numpy arrays of every signed dtype, lists and tuples of numpy integers, ids
    and tokens as numpy integers, and the cache's sizes as the narrowest numpy ints that hold them (int8 sizes
    whose products, such as the tokens served, pass 127); then ids and tokens past int64, where a failure is
    hygiene."""
    runs = []
    for sizes in ((8, 2), (9, 3), (9, 40)):
        drawer = Drawer(ex.rng, sizes)
        sequences = [drawer.chat(1, 2, turns=3) + drawer.sequence(24) for _ in range(3)]
        runs.append((sizes, [[_typed(op, n + i) for i, op in enumerate(ops)] for n, ops in enumerate(sequences)]))
    expect_sequences(ex, runs, typed=True)
    with past_int64("ids and tokens past int64"):
        expect_sequences(ex, [((6, 2), [PAST_INT64])])


BIG = 2**64 + 5
PAST_INT64 = [add(BIG, [1, 2, BIG, 3, 4]), append(BIG, 2**65), add(-2**70, [1, 2, BIG, 3, 9]), free(BIG),
              add(BIG, [1, 2, BIG, 3, 4, 7])]  # a seq_id is any int, a token any int >= 0


SIGNED = (np.int8, np.int16, np.int32, np.int64)


def _holding(value: int) -> list:
    """The signed dtypes that hold ``value``, narrowest first (the typed runs draw no int past int64)."""
    return [t for t in SIGNED if np.iinfo(t).min <= value <= np.iinfo(t).max]


def narrowest(value: int):
    """``value`` as the narrowest signed numpy integer that holds it."""
    return _holding(value)[0](value)


def _typed(op, n) -> Op:
    """``op`` with its ints as numpy integers and its prompt as a tuple, an array of a signed dtype that holds
    it, a list, or a list or tuple of numpy integers (the n-th of each, in turn; dtypes mixed by value)."""
    def signed(value):
        fits = _holding(value)
        return fits[n % len(fits)](value)

    if op.name != "add_request":
        return Op(op.name, tuple(signed(a) for a in op.args))
    prompt, form, fits = op.args[1], n % 5, _holding(max(op.args[1]))
    typed = [tuple(prompt), np.array(prompt, dtype=fits[n % len(fits)]), prompt,
             [signed(t) for t in prompt], tuple(signed(t) for t in prompt)]  # numpy ints in a list, a tuple too
    return add(signed(op.args[0]), typed[form])


def _array_prompt(op, n) -> Op:
    """add_request with its prompt as an int array of the n-th signed dtype that holds it: the form a
    cache may keep by reference (np.asarray copies a list, never an array), which the caller reuses."""
    fits = _holding(max(op.args[1]))
    return add(op.args[0], np.array(op.args[1], dtype=fits[n % len(fits)]))


def check_keeps_its_own_prompt(ex):
    """The caller reuses its prompt list or array after add_request: the cache's own tokens must not change."""
    runs = []
    for sizes in ((9, 2), (10, 3)):
        drawer = Drawer(ex.rng, sizes)
        sequences = [drawer.chat(1, 2, turns=3) + drawer.sequence(20) for _ in range(2)]
        sequences.append([_typed(op, i) if op.name == "add_request" and i % 2 else op
                          for i, op in enumerate(drawer.chat(3, 4, turns=3) + drawer.sequence(20))])
        sequences += [[_array_prompt(op, i) if op.name == "add_request" else op  # np.asarray keeps an
                       for i, op in enumerate(drawer.chat(5, 6, turns=3))] for _ in range(3)]  # array by reference
        runs.append((sizes, sequences))
    expect_sequences(ex, runs, typed=True, overwrite=True)


REJECTED = "an invalid call must say what is wrong and leave the cache as it was"


def _invalid_calls(ex):
    """(sizes, setup operations, invalid operations after them)."""
    setup = [add(1, [4, 5, 6, 7, 8]), add(2, [4, 5, 9]), free(2), append(1, 3)]
    bad = [add(1, [1, 2]), add(3, []), add(3, np.zeros(0, np.int64)), add(3, [4, 5, -1]),
           add(3, np.array([4, -2, 5], np.int16)), add(3, [4] * 30 + [-1]),  # invalid before out of blocks
           append(1, -1), append(9, 3), append(2, 3), free(2), free(9),
           Op("num_tokens", (2,)), Op("block_table", (9,))]
    return (9, 2), setup, bad


def check_rejects_the_invalid_case_shown(ex):
    """The invalid call the public tests show raises ValueError (in a live grading too)."""
    cache = ex.candidate.call("PrefixCache", 4, 2)
    cache.call("add_request", 1, [1, 2])
    expect_rejected(ex, cache.call, "add_request", 1, [3, 4],
                    call="add_request(1, [3, 4]) after add_request(1, [1, 2])", diagnosis=INVALID, why=SHOWN,
                    case={"sizes": (4, 2)})


def check_rejects_invalid_arguments(ex):
    """Sizes below 1 or not ints (2.5, a string, None), unknown or reused ids, empty prompts, negative
    tokens: ValueError."""
    for sizes in [(0, 4), (3, 0), (-2, 4), (3, -1), (2.5, 4), ("3", 4), (3, None)]:
        expect_rejected(ex, ex.candidate.call, "PrefixCache", *sizes, call=f"PrefixCache{sizes}",
                        diagnosis=INVALID, why=REJECTED, case={"sizes": sizes})
    sizes, setup, bad = _invalid_calls(ex)
    cache = ex.candidate.call("PrefixCache", *sizes)
    for op in setup:
        cache.call(op.name, *op.args)
    for op in bad:
        expect_rejected(ex, cache.call, op.name, *op.args, call=f"{op} after {describe_ops(setup)}",
                        diagnosis=INVALID, why=REJECTED, case={"sizes": sizes})


def check_rejected_calls_change_nothing(ex):
    """After an invalid call that raised ValueError, the counts and every table are as they were."""
    sizes, setup, bad = _invalid_calls(ex)
    driver, look, ids = Driver(ex, sizes), Op("num_free_blocks"), [1, 2, 3, 9]
    for op in setup:
        driver.cache.call(op.name, *op.args)
    for op in bad:
        before = driver.step(look, ids, {1})[2]
        got, _, after = driver.step(op, ids, {1})
        if got == ("raises", "ValueError") and after != before:
            fail(f"{op} raised ValueError but changed the cache (its counts or tables): validation comes first",
                 {"sizes": sizes, "operations": describe_ops(setup + [op])}, kind="hygiene")
