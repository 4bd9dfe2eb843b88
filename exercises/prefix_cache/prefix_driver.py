"""Kit code: how the grader drives a PrefixCache inside your own process (you need not read it).

Each ``step`` makes one call on the cache and then reads everything the grader compares, in one
round trip: the call's outcome, ``num_free_blocks``, ``num_cached_blocks``, and ``num_tokens``
and ``block_table`` of the sequences asked about. The prompts it passes are kept, to report
whether a later call changed one; when asked, it overwrites a prompt after ``add_request``
returns and passes that same list or array again, rewritten, as the next prompt of its type and
length (a caller reuses its buffer, after a refusal too: the cache keeps its own copy and
answers the prompt as it is now), and writes into every writable block table it is given (the
caller owns it), through a plain ndarray over the table's memory, whatever class the table is.
It keeps the last tables it was given, to report whether a later call changed one (a table
handed out is the caller's, whether it wrote into it or not). An edited copy of this file is
never used: the grader loads the kit's own, before your module, where your code cannot reach it.
"""
import numpy as np

_passed = {}  # id(cache) -> [(prompt object, the values it held when passed)] for each prompt passed
_buffers = {}  # id(cache) -> {(type, length, dtype): the caller's buffer for prompts of that form}
_tables = {}  # id(cache) -> [(step, seq id, table array given, the values the caller left in it)]
_steps = {}  # id(cache) -> operations played
HELD_TABLES = 64  # tables watched per cache, the latest


def _outcome(fn, *args):
    """["ok", value] or ["raises", exception class names (most derived first), message]."""
    try:
        value = fn(*args)
    except Exception as exc:  # noqa: BLE001  the grader judges every exception
        return ["raises", [c.__name__ for c in type(exc).__mro__], str(exc)[:200]]
    if issubclass(type(value), np.ndarray):  # a subclass's own copy() or __setitem__ would answer our probes
        value = np.ndarray.view(value, np.ndarray)
    if value is None or isinstance(value, (bool, int, float, str, np.ndarray, np.generic)):
        return ["ok", value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, np.integer)) for v in value):
        return ["ok", value]
    return ["ok", f"<a {type(value).__name__}>"]


def _values(prompt):
    return np.array(prompt).tolist()


def _rewrite(passed, buffer, values):
    """The caller writes ``values`` into its own buffer: the values it passed are now these."""
    buffer[:] = values
    passed[:] = [(p, _values(p) if p is buffer else held) for p, held in passed]


def _buffer(cache, prompt, passed):
    """The caller's buffer for prompts of this form, rewritten with ``prompt`` (the first prompt of a form is it)."""
    form = (type(prompt), len(prompt), getattr(prompt, "dtype", None))
    buffer = _buffers.setdefault(id(cache), {}).setdefault(form, prompt)
    if buffer is not prompt:
        _rewrite(passed, buffer, _values(prompt))
    return buffer


def _moved(tables):
    """[step, seq id] of each held table whose values changed since the caller left them, now forgotten."""
    moved = [[step, s] for step, s, answer, left in tables if not np.array_equal(answer, left)]
    tables[:] = [t for t in tables if np.array_equal(t[2], t[3])]
    return moved


def step(cache, name, args, ids, overwrite=False, first=False):
    """One operation and the reads after it: [outcome, free, cached, [[id, tokens, table]...],
    indexes of earlier prompts that changed since they were passed, [step, seq id] of tables given
    at an earlier step that changed since]. ``first`` starts a new cache's record (a new cache may
    reuse the id of one already gone)."""
    if first:
        _passed[id(cache)], _buffers[id(cache)], _tables[id(cache)], _steps[id(cache)] = [], {}, [], 0
    tables, now = _tables.setdefault(id(cache), []), _steps.get(id(cache), 0)
    _steps[id(cache)] = now + 1
    passed = _passed.setdefault(id(cache), [])
    reuse = overwrite and name == "add_request" and not isinstance(args[1], tuple)
    if reuse:
        args[1] = _buffer(cache, args[1], passed)
    if name == "add_request":
        passed.append((args[1], _values(args[1])))
    outcome = _outcome(getattr(cache, name), *args)
    moved = _moved(tables)
    if reuse:
        _rewrite(passed, args[1], [t + 1 for t in _values(args[1])])
    reads = []
    for s in ids:
        tokens, table = _outcome(cache.num_tokens, s), _outcome(cache.block_table, s)
        moved += _moved(tables)  # a read is a later call too: one refilling the table it handed out shows here
        if table[0] == "ok" and type(table[1]) is np.ndarray and table[1].dtype.kind in "iu":
            answer, table = table[1], ["ok", table[1].copy()]
            if answer.flags.writeable:
                answer[...] = -7  # the caller owns a table it is given, and may write into it
            tables.append((now, s, answer, answer.copy()))
        reads.append([s, tokens, table])
    changed = [i for i, (prompt, held) in enumerate(passed) if _values(prompt) != held]
    counts = _outcome(cache.num_free_blocks), _outcome(cache.num_cached_blocks)
    moved += _moved(tables)
    del tables[:-HELD_TABLES]
    return [outcome, *counts, reads, changed, moved]
