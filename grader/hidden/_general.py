"""The general rules of CONTRACT section 1, checked for every exercise by one mechanism.

The plugin (``grader/plugin.py``) runs these checks after each exercise's own checks, on the same
``ex``, so they see every call those checks made: no exercise writes code for them.

- Ownership: the child probes every candidate call (``sandbox/child.py``): it digests each argument
  before and after; it watches an argument the candidate kept a reference to (a stored prompt
  list) and reports when a later call changed it; it holds the arrays a call returned, reports
  when a later call changed them, and scribbles over a writable result once it has been sent, so
  a memo handed out writable gives a later call a visibly wrong answer (the value checks see
  it); a returned list is emptied once sent, for the same reason. The storage attributes an
  exercise names (``keys``, ``positions``, ...) are attribute reads, never probed; the cache or
  state object a function is given is digested by its type only, so its state may change.
- Calls in any order: the recorded calls are replayed, shuffled, each after the same call with its
  float64 arrays in float32 (a buffer kept in an earlier call's dtype), and a few with their float and
  bool rows shuffled are answered by a fresh process of the module and then by the running one.
- Refused in any order: the calls that raised ValueError (the sandbox keeps the first few of each
  function) are asked again, each after its valid twin (2.0 made 2): a memo consulted before the
  arguments are checked answers them.
- Arrays as they are now: two recorded calls alike but for their arrays' values; the first call's
  arrays, lent as the caller's own (``grader/held.py``), are rewritten with the second's values and
  the function is called again on them: it must give the second call's answer.
- Layouts: every array a check passes comes in C order, Fortran order or reversed (the sandbox's
  ``laid_out``), so each check meets an answer that assumes C order; read-only arrays are tried here,
  on recorded calls (a crash from writing into one is the hygiene slip of changing an argument).
- Integer types, retyped two ways: every int of the call in the one narrowest signed dtype that
  holds them all (ints become numpy scalars, int arrays and lists of ints arrays), and each int
  in its own narrowest dtype beside the widest left as Python ints (``np.int8(2)`` with
  ``32767``, which NumPy 2 refuses to mix), lists of ints becoming lists of numpy integers of mixed
  dtypes. The sandbox keeps copies of up to
  ``client.RECORDED_PER_FUNCTION`` small module-level calls per function that took data only
  (no cache, no lent object), with their answers; these checks replay a bounded sample, smallest
  first and shuffled, and compare with the answers first given. An exercise's ``integer_edges()``
  adds calls whose integers reach the top of int8, int16 or int32, where arithmetic kept in the
  inputs' dtype wraps (``p + 1`` at 127), or put small ints beside positions past their dtype
  (``np.int8(100)`` as a window beside ``S = 300``): right as Python ints, and the same retyped. A
  ValueError or TypeError on a retyped call is a hygiene slip only when int64 numpy integers
  are refused too (numpy integers refused as such); when int64 works it is a crash. A parameter
  the stub annotates ``float`` (rope's ``base``) keeps the value first given: an int is a float
  value there, a numpy integer is not one.
- Signatures: recorded calls are asked again with every argument the stub's signature lets a caller
  pass either way given by position, then by name, and with optional arguments left out given as
  their defaults; the answer must not change (red team 25: a positional window ignored, a ``base=``
  by name dropped). A TypeError there is a renamed parameter: a hygiene slip.

Rerunning one of these with ``--check`` runs the exercise's own checks too (their results are
not reported), so the replayed calls are the same as in the full run.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import numpy as np

from grader.checking import close, fail, plural, rejects_argument_type
from grader.checking.binding import REQUIRED, is_default, signature, stub_definition
from grader.held import Held
from grader.sandbox import CandidateRaised, call_text
from grader.sandbox.wire import mapped, read_only

REPLAYED = 10  # recorded calls each replay check makes at most
FRESH = 6  # calls the order check also makes with new arguments, in a fresh process and in the running one
SIGNED = (np.int8, np.int16, np.int32, np.int64)


def check_leaves_arguments_unchanged(ex):
    """Every function leaves its arguments unchanged (arrays, lists, the model's parameters)."""
    own = ex.sandbox.ownership
    _require_probes(own)
    if own.changed:
        what, labels = own.changed[0]
        said = ", ".join(_argument(label) for label in labels)
        fail(f"{what} changed its {said}: a function leaves its arguments unchanged (only the cache or state "
             f"object the exercise names may change); {plural(len(own.changed), 'call')} did so", kind="hygiene")
    if own.aliased:
        earlier, label, later = own.aliased[0]
        fail(f"the {_argument(label)} given to {earlier} was kept by reference and changed during a later call, "
             f"{later}: a function leaves its arguments unchanged, later too (keep a copy of what you store)",
             kind="hygiene")


def _argument(label: str) -> str:
    return f"argument {int(label) + 1}" if label.isdigit() else label


def check_results_belong_to_the_caller(ex):
    """An array a function returned is the caller's: no later call changes it or hands it back writable."""
    own = ex.sandbox.ownership
    _require_probes(own)
    if own.again:
        earlier, later = own.again[0]
        fail(f"a later {later} handed back the writable array an earlier {earlier} had returned: a result "
             "belongs to the caller, and a memo that hands out its own array answers with whatever the last "
             "caller wrote there (the grader wrote over it, as a caller may); hand out a copy, or a read-only array")
    if own.moved:
        earlier, later = own.moved[0]
        fail(f"the array returned by {earlier} changed during a later call, {later}: a result belongs to the "
             "caller (a reused output buffer, or a memo handed out writable)")


def check_same_answer_in_any_order(ex):
    """A function without state gives the same answer to the same arguments, in any order."""
    sample = _sample(ex, lambda r: True)
    for i in ex.rng.permutation(len(sample)):
        recorded = sample[i]
        narrow = _in_float32_first(getattr(ex.candidate, recorded.name), recorded.args, recorded.kwargs)
        got = _replay(ex, recorded, recorded.args, recorded.kwargs, "the same arguments again")
        if not _same(got, recorded.value, recorded.args):
            emptied = (" It answered an empty list: the list an earlier call returned is the caller's, and the "
                       "grader emptied it, as a caller may; a memo that hands out its own list loses its answer"
                       if isinstance(got, list) and not got and recorded.value else "")
            after = (" and after the same call with float32 arrays (a buffer or constant kept in the dtype of an "
                     "earlier call breaks this)" if narrow else "")
            fail(f"{recorded.what} answered differently when called again after other calls{after}: a function "
                 "that holds no state gives the same answer to the same arguments (a cache keyed on part of "
                 f"them breaks this).{emptied}", case={"call": recorded.what})
    # the largest calls (rows to shuffle), those with float64 arrays first (their float32 twins go first)
    _fresh_against_warm(ex, _sample(ex, lambda r: True, lambda r: (not _has_float64((r.args, r.kwargs)),
                                                                   -_size(r)))[:FRESH])


def _fresh_against_warm(ex, sample):
    """New arguments of the recorded shapes (rows of float and bool arrays shuffled, the same
    shuffle for arrays of the same length), answered first by a fresh process of the candidate's
    module, then by the one that made every earlier call: both must give the same answer. A cache
    keyed on part of the arguments (a shape, a length) answers the second from the first call. The fresh
    process first answers each call with its float64 arrays in float32: a buffer or constant kept in the
    dtype of a module's first call gives it the wrong precision later."""
    calls = [(r, *_shuffled(ex.rng, (r.args, r.kwargs))) for r in sample]
    fresh = ex.sandbox.twin()  # launched as the exercise's checks began
    try:
        for r, args, kwargs in calls:  # its very first calls in float32: nothing may keep their dtype
            _in_float32_first(getattr(fresh.module, r.name), args, kwargs)
        first = [_outcome(getattr(fresh.module, r.name), args, kwargs) for r, args, kwargs in calls]
    finally:
        fresh.let_go()  # it winds down beside the next checks; the sandbox's close reaps it
    for (recorded, args, kwargs), (value, raised) in zip(calls, first):
        again, raised_again = _outcome(getattr(ex.candidate, recorded.name), args, kwargs)
        what = call_text(recorded.name, args, kwargs)
        if raised != raised_again or (raised is None and not _same(again, value, args)):
            fail(f"{what} answered differently after the earlier calls than in a fresh process whose first calls "
                 f"were in float32 ({raised_again or 'a value'} against {raised or 'a value'}): a function that "
                 "holds no state gives the same answer whatever was called before (a cache keyed on part of the "
                 "arguments, such as a shape, or a buffer kept in the first call's dtype, breaks this)",
                 case={"call": what})


def _in_float32_first(fn, args, kwargs) -> bool:
    """Call ``fn`` with the call's float64 arrays in float32, whatever it answers; whether there were any."""
    narrow = _float32((args, kwargs))
    if narrow is not None:
        _outcome(fn, *narrow)
    return narrow is not None


def _has_float64(value) -> bool:
    return any(a.dtype == np.float64 for a in _arrays(value))


def _outcome(fn, args, kwargs):
    """(value, None), or (None, the exception's type name) when the candidate raised."""
    try:
        return fn(*args, **kwargs), None
    except CandidateRaised as exc:
        return None, exc.type_name


def _changed(value, leaf):
    """``mapped(value, leaf)``, or None when ``leaf`` changed nothing (it returns its argument itself)."""
    changed = []

    def watched(v):
        out = leaf(v)
        if out is not v:
            changed.append(v)
        return out

    out = mapped(value, watched)
    return out if changed else None


def _shuffled(rng, value):
    """(args, kwargs) with the rows of every float and bool array permuted: one permutation per
    row count, so arrays that go together (scores and their mask) stay together."""
    perms = {}

    def leaf(v):
        if isinstance(v, np.ndarray) and v.dtype.kind in "fb" and v.ndim >= 1 and len(v) > 1:
            return v[perms.setdefault(len(v), rng.permutation(len(v)))]
        return v

    return mapped(value, leaf)


def check_refuses_in_any_order(ex):
    """Invalid arguments are refused whatever was called before: asked again after a valid call of the
    same values (a float 2.0 beside the int 2 it equals), a call refused once is refused again."""
    ex.sandbox.recording = False
    refused = [(r, _valid_twin((r.args, r.kwargs))) for _, calls in sorted(ex.sandbox.refused.items())
               for r in calls if not _has_bool((r.args, r.kwargs))]  # a bool as a size: either answer is fine
    refused.sort(key=lambda pair: pair[1] is None)  # those with a valid twin first (stable: per function)
    for recorded, twin in refused[:REPLAYED]:
        fn = getattr(ex.candidate, recorded.name)
        if twin is not None:
            _outcome(fn, *twin)
        value, raised = _outcome(fn, recorded.args, recorded.kwargs)
        if raised is None:
            after = f" after {call_text(recorded.name, *twin)} was answered" if twin is not None else " later"
            fail(f"{recorded.what} raised ValueError at first, and was answered{after}: invalid arguments are "
                 "refused whatever was called before (a memo consulted before the arguments are checked "
                 "answers them)", kind="hygiene", case={"call": recorded.what})


def _has_bool(value) -> bool:
    return any(type(v) is bool or isinstance(v, np.bool_) for v in _leaves(value))


def _valid_twin(value):
    """(args, kwargs) with each float scalar that equals an int replaced by that int, or None when
    there is none: the valid call a memo keyed on equal values would confuse with this one."""
    def leaf(v):
        integral = (type(v) is float or isinstance(v, np.floating)) and np.isfinite(v) and float(v) == int(v)
        return int(v) if integral else v

    return _changed(value, leaf)


def check_answers_arrays_as_they_are_now(ex):
    """The same arrays, rewritten in place by the caller with another call's values, get that call's
    answer: nothing is keyed on an array's identity."""
    held = None
    for name, first, second in _rewritable_pairs(ex):
        held = held or Held(ex)
        fn = getattr(ex.candidate, name)
        _, box = held.call(fn, *first.args)
        held.overwrite(box, box.arrays, [second.args[i] for i in box.arrays])
        try:
            got = held.again(fn, box)
        except CandidateRaised as exc:
            fail(f"{name} called again on the arrays of {first.what}, rewritten in place with those of {second.what}, "
                 f"raised {exc.type_name} ({exc.message[:120]}), where {second.what} was answered",
                 kind="crash", case={"call": second.what})
        if not _same(got, second.value, second.args):
            fail(f"{name} called again on the arrays of {first.what}, once the caller had rewritten them in place with "
                 f"the values of {second.what}, gave another answer than {second.what} did: a function answers its "
                 "arguments as they are now (a memo keyed on an array's identity does not)", case={"call": second.what})


def _rewritable_pairs(ex) -> list:
    """(function, first call, second call) of recorded calls alike in everything but their arrays' values
    (the same shapes and dtypes, the same other arguments, positional only): at most one pair a function."""
    pairs = []
    for name, calls in sorted(ex.sandbox.recorded.items()):
        by_form = {}
        for r in calls:
            if r.kwargs or not any(isinstance(a, np.ndarray) for a in r.args):
                continue
            form = tuple((a.shape, a.dtype.str) if isinstance(a, np.ndarray) else ("=", repr(a)) for a in r.args)
            earlier = by_form.setdefault(form, r)
            if earlier is not r and any(isinstance(a, np.ndarray) and not np.array_equal(a, b, equal_nan=True)
                                        for a, b in zip(earlier.args, r.args)):
                pairs.append((name, earlier, r))
                break
    return pairs[:REPLAYED]


def check_read_only_arguments(ex):
    """Arrays given read-only (a caller's may be: a memory-mapped file, a broadcast, a frozen buffer)
    get the same answer as writable ones."""
    for recorded in _sample(ex, lambda r: any(a.size for a in _arrays((r.args, r.kwargs)))):
        args, kwargs = read_only((recorded.args, recorded.kwargs))
        try:
            got = getattr(ex.candidate, recorded.name)(*args, **kwargs)
        except CandidateRaised as exc:
            writes = "read-only" in exc.message
            fail(f"{recorded.what} raised {exc.type_name} ({exc.message[:120]}) when its arrays were read-only, "
                 "after answering them writable" + (": it writes into its arguments (even if it puts them back), "
                 "and a function leaves its arguments unchanged" if writes else ""),
                 kind="hygiene" if writes else "crash", case={"call": recorded.what})
        if not _same(got, recorded.value, recorded.args):
            fail(f"{recorded.what} gave another answer when its arrays were read-only: the same values are the same "
                 "input, whatever the array's flags", case={"call": recorded.what})


def check_any_signed_integer_type(ex, request):
    """Integers given as numpy scalars and arrays of any signed dtype that holds them work alike."""
    # up to the top of that dtype: each exercise's integer_edges() reaches it
    edges = getattr(request.module, "integer_edges", None)
    for name, args, kwargs in edges() if edges else ():
        _expect_edge(ex, name, args, kwargs)
    for recorded in _sample(ex, _retypable, _fill):
        for retype in (_retyped_alike, _retyped_each):
            _expect_same_retyped(ex, recorded.name, recorded.args, recorded.kwargs, recorded.value,
                                 f"the same values as first given ({recorded.what})", retype)


def check_arguments_bound_either_way(ex):
    """Each argument is read the same given by position or by name, as the contract's signature allows, and
    an optional one left out is its default."""
    if ex.sandbox.binding_refusals:  # the exercise's checks drew bindings for every call (checking.binding)
        fail(f"{ex.sandbox.binding_refusals[0]}, then answered as written: the contract's signature (its "
             "parameters' names, defaults and order) lets a caller pass them so", kind="hygiene")
    # the calls that give the most arguments first: an optional one given is what a binding can lose
    for recorded in _sample(ex, lambda r: signature(ex.exercise.stub_path, r.name) is not None,
                            lambda r: (-len(r.args) - len(r.kwargs), _size(r))):
        params = signature(ex.exercise.stub_path, recorded.name)
        for args, kwargs, how in _rebound(params, recorded.args, recorded.kwargs, ex.rng):
            try:
                with ex.calls_as_written():
                    got = getattr(ex.candidate, recorded.name)(*args, **kwargs)
            except CandidateRaised as exc:
                fail(f"{recorded.what} raised {exc.type_name} ({exc.message[:120]}) with {how}, after answering "
                     "the first time: the contract's signature (its parameters' names, defaults and order) lets a "
                     "caller pass them so", case={"call": recorded.what},
                     kind="hygiene" if exc.is_a("TypeError") else "wrong")  # a renamed parameter is a slip
            if not _same(got, recorded.value, recorded.args):
                fail(f"{recorded.what} answered differently with {how}: the contract's signature lets a caller "
                     "pass it so, and the call is the same call", case={"call": recorded.what})


def _rebound(params, args, kwargs, rng):
    """The recorded call bound the other ways its signature allows: (args, kwargs, how said). Names go in
    an order drawn from ``rng``: a name is read by its name, never by its place among the others."""
    given = dict(zip([n for n, *_ in params], args)) | dict(kwargs)
    if set(given) - {n for n, *_ in params}:
        return []
    out = []
    names = [n for n, kind, _ in params if kind != "keyword"]
    last = max((i for i, n in enumerate(names) if n in given), default=-1)
    for first in _positional_prefixes(params, given, last, rng):  # all it can by position, then some of them
        positional = [given.get(n, d) for (n, _, d) in params[:first]]
        keywords = _shuffled_names({n: v for n, v in given.items() if n not in names[:first]}, rng)
        how = ("every argument it can by position" if first == last + 1 else
               f"its first {f'{first} arguments' if first > 1 else 'argument'} by position and the rest by name")
        out.append((positional, keywords, how + _order_said(keywords)))
    positional_only = [given[n] for n, kind, _ in params if kind == "positional" and n in given]
    keywords = _shuffled_names({n: given[n] for n, kind, _ in params if kind != "positional" and n in given}, rng)
    out.append((positional_only, keywords, "every argument it can by name" + _order_said(keywords)))
    defaults = {n: d for n, kind, d in params if d is not REQUIRED and n not in given and kind != "positional"}
    if defaults:
        out.append((list(args), dict(kwargs) | defaults, "its optional arguments given as their defaults "
                    f"({', '.join(f'{n}={d!r}' for n, d in defaults.items())})"))
    left_out = [n for n, kind, d in params if kind != "positional" and n in given and is_default(given[n], d)]
    if left_out:  # spelled out as their defaults: left out, the answer's own defaults are read
        kept = [n for n, *_ in params if n in given and n not in left_out]
        first = next((i for i, n in enumerate(names) if n not in kept), len(names))
        out.append(([given[n] for n in names[:first]], {n: given[n] for n in kept if n not in names[:first]},
                    f"{', '.join(left_out)} left out (the contract's default{'s' if len(left_out) > 1 else ''})"))
    return out


def _positional_prefixes(params, given, last, rng) -> list[int]:
    """How many leading arguments go by position: every one up to the last given (when each is given or has a
    default), and a drawn shorter prefix of at least one, the rest then going by name."""
    fillable = 0
    while fillable <= last and (params[fillable][0] in given or params[fillable][2] is not REQUIRED):
        fillable += 1
    out = [last + 1] if fillable == last + 1 else []
    if min(fillable, last) >= 1:
        out.append(int(rng.integers(1, min(fillable, last) + 1)))
    return out


def _shuffled_names(keywords: dict, rng) -> dict:
    return {n: keywords[n] for n in rng.permutation(list(keywords)).tolist()} if keywords else {}


def _order_said(keywords: dict) -> str:
    return f" (names in the order {', '.join(keywords)})" if len(keywords) > 1 else ""


def _retypable(recorded) -> bool:
    """A call with ints that some signed dtype holds (sizes past 2^63 stay Python ints)."""
    widest = _widest((recorded.args, recorded.kwargs))
    return widest is not None and widest <= np.iinfo(np.int64).max


def _expect_edge(ex, name, args, kwargs):
    """An exercise's call whose integers reach the top of their narrowest signed dtype, where
    arithmetic in that dtype wraps (``p + 1`` at 127 in int8): the same answer in that dtype as
    with Python ints and int64 arrays. Only the argument type is judged here (issue 22): whether
    the answer with Python ints is right is the value checks' to say."""
    try:
        wide = getattr(ex.candidate, name)(*args, **kwargs)
    except CandidateRaised as exc:
        what = call_text(name, args, kwargs)
        fail(f"{what} raised {exc.type_name} ({exc.message[:120]}): these integers, near the top of "
             f"{np.dtype(_narrowest(_widest((args, kwargs)))).name}, are valid", kind="crash", case={"call": what})
    for retype in (_retyped_alike, _retyped_each):
        _expect_same_retyped(ex, name, args, kwargs, wide, "the same values as Python ints", retype,
                             wraps=" (arithmetic in the inputs' dtype wraps near its top)")


def _expect_same_retyped(ex, name, args, kwargs, want, given: str, retype, wraps: str = ""):
    """The call with its ints retyped by ``retype`` answers ``want``, the answer to the values as
    ``given``. Refusing numpy integers as such (a ValueError or TypeError that the same values as
    int64 scalars and arrays meet too) is a hygiene slip; failing on a narrow dtype where int64
    answers (arithmetic that overflows in it, a whitelist of dtypes) is a crash, as is any other
    exception; another answer is wrong."""
    call = getattr(ex.candidate, name)
    narrow_args, narrow_kwargs = _floats_as_given(ex, name, (args, kwargs), retype((args, kwargs)))
    if not _any_numpy_int((narrow_args, narrow_kwargs)):
        return  # nothing to retype this way (every int is among the widest)
    what = call_text(name, narrow_args, narrow_kwargs)
    try:
        got = call(*narrow_args, **narrow_kwargs)
    except CandidateRaised as exc:
        refused = rejects_argument_type(exc) and _refuses_int64_too(ex, name, narrow_args, narrow_kwargs)
        said = (f"{what} raised {exc.type_name} ({exc.message[:120]}), where {given} were answered: integers of "
                "any signed dtype that holds them are valid")
        fail(said + ("" if refused else " (the same values as int64 numpy integers were answered: the narrow "
                     "dtype itself failed)"), kind="hygiene" if refused else "crash", case={"call": what})
    if not _same(got, want, args):
        fail(f"{what} gave another answer than {given}{wraps}: integers of any signed dtype that holds their "
             "values are the same input", case={"call": what})


def _floats_as_given(ex, name, given, retyped):
    """``retyped`` (args, kwargs) with each parameter the stub annotates ``float`` as ``given``."""
    floats = _float_parameters(ex.exercise.stub_path, name)
    (args, kwargs), (new_args, new_kwargs) = given, retyped
    return ([a if i in floats else n for i, (a, n) in enumerate(zip(args, new_args))],
            {k: kwargs[k] if k in floats else v for k, v in new_kwargs.items()})


@functools.cache
def _float_parameters(stub: Path, name: str) -> frozenset:
    """The positions and names of the parameters of the stub's module-level function or class ``name`` (its
    ``__init__``, less ``self``) that are annotated ``float``; read from the stub's source, never run."""
    found = stub_definition(stub, name)
    if isinstance(found, ast.ClassDef):
        found = next((n for n in found.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        params = found.args.args[1:] if found else []
    else:
        params = [*found.args.posonlyargs, *found.args.args] if isinstance(found, ast.FunctionDef) else []
    floats = {i for i, p in enumerate(params) if _annotated_float(p)}
    keywords = params + (found.args.kwonlyargs if found else [])
    return frozenset(floats | {p.arg for p in keywords if _annotated_float(p)})


def _annotated_float(param: ast.arg) -> bool:
    return param.annotation is not None and ast.unparse(param.annotation).strip("'\"") == "float"


def _any_numpy_int(value) -> bool:
    if isinstance(value, np.signedinteger) or (isinstance(value, np.ndarray) and value.dtype.kind == "i"):
        return True
    if isinstance(value, (list, tuple)):
        return any(_any_numpy_int(v) for v in value)
    if isinstance(value, dict):
        return any(_any_numpy_int(v) for v in value.values())
    return False


def _refuses_int64_too(ex, name, args, kwargs) -> bool:
    """Whether the retyped call with every int as an int64 numpy scalar or array, in the same containers (a
    list of numpy integers stays a list), is refused by type as well: then numpy integers as such were
    refused (a type check too strict), not a narrow dtype."""
    wide = _floats_as_given(ex, name, (args, kwargs), (_retyped(args, np.int64, lists=list),
                                                       _retyped(kwargs, np.int64, lists=list)))
    try:
        getattr(ex.candidate, name)(*wide[0], **wide[1])
    except CandidateRaised as exc:
        return rejects_argument_type(exc)
    return False


# -- shared -----------------------------------------------------------------------------------------


def _require_probes(own):
    if own.unreported:
        fail(f"the candidate process did not report what {own.unreported[0]} did to its arguments and "
             "results: its reply lacked the probe every call carries", kind="crash")


def _sample(ex, keep, first=None) -> list:
    """Up to REPLAYED recorded calls that ``keep`` accepts, in the order ``first`` gives (default:
    the smallest first), spread over every function (one of each, then a second of each, ...)."""
    ex.sandbox.recording = False  # replays are not recorded again
    by_name = {name: sorted((r for r in calls if keep(r)), key=first or _size)
               for name, calls in sorted(ex.sandbox.recorded.items())}
    sample, depth = [], 0
    while len(sample) < REPLAYED and any(len(calls) > depth for calls in by_name.values()):
        sample += [calls[depth] for calls in by_name.values() if len(calls) > depth]
        depth += 1
    return sample[:REPLAYED]


def _size(recorded) -> int:
    return sum(a.size for a in _arrays((recorded.args, recorded.kwargs))) + len(str(recorded.what))


def _replay(ex, recorded, args, kwargs, how):
    try:
        return getattr(ex.candidate, recorded.name)(*args, **kwargs)
    except CandidateRaised as exc:
        fail(f"{recorded.what} raised {exc.type_name} ({exc.message[:120]}) when called with {how}, after "
             "answering the first time", case={"call": recorded.what})


def _same(got, want, inputs) -> bool:
    """The same answer: the same structure, exact integers and bools, floats within section 1's
    precision (a replay may round differently, never answer differently)."""
    if isinstance(want, (tuple, list)):
        return isinstance(got, type(want)) and len(got) == len(want) and all(
            _same(g, w, inputs) for g, w in zip(got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k], inputs) for k in want)
    if isinstance(want, (np.ndarray, np.generic, int, float)) and not isinstance(want, bool):
        g, w = np.asarray(got), np.asarray(want)
        if g.shape != w.shape or g.dtype.kind not in "biuf" or w.dtype.kind not in "biuf":
            return False
        if w.dtype.kind == "f" or g.dtype.kind == "f":
            floats = [a for a in _arrays(inputs) if a.dtype.kind == "f"]
            magnitude = max((float(np.max(np.abs(a[np.isfinite(a)]), initial=1.0)) for a in floats), default=1.0)
            return close(g, w, floats, min(magnitude, 1e4))
        return bool(np.array_equal(g, w))
    return got == want and type(got) is type(want)


def _fill(recorded) -> float:
    """Calls whose ints come nearest the top of their narrowest dtype first: where arithmetic in
    that dtype wraps soonest."""
    widest = _widest((recorded.args, recorded.kwargs))
    return -widest / np.iinfo(_narrowest(widest)).max


def _leaves(value):
    """Every value ``value`` (arguments: lists, tuples and dicts of values) holds that is not such a container."""
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value


def _arrays(value):
    return (v for v in _leaves(value) if isinstance(v, np.ndarray))


def _ints(value):
    """Every integer a value carries: Python and numpy ints (never bools), signed int arrays."""
    for v in _leaves(value):
        if isinstance(v, (int, np.signedinteger)) and not isinstance(v, (bool, np.bool_)):
            yield int(v)
        elif isinstance(v, np.ndarray) and v.dtype.kind == "i" and v.size:
            yield int(v.min())
            yield int(v.max())


def _widest(value):
    """The largest magnitude among the integers ``value`` carries, or None when it has none."""
    found = list(_ints(value))
    return max(max(found), -min(found) - 1) if found else None


def _narrowest(widest: int):
    return next(t for t in SIGNED if widest <= np.iinfo(t).max)


def _retyped_alike(value):
    """Every int of ``value`` in the one narrowest signed dtype that holds them all."""
    return _retyped(value, _narrowest(_widest(value)))


def _retyped_each(value, common=None):
    """Each int scalar of ``value`` whose own narrowest signed dtype is narrower than the one that
    holds every int of the call becomes a numpy scalar of that dtype; the others stay Python ints,
    int arrays take their own narrowest dtype, and an index list of ints becomes a list of numpy
    integers, each in its own narrowest dtype (a list works where an array is asked, and numpy
    integers where ints are). Arithmetic that mixes a narrow numpy integer
    with a Python int too big for its dtype fails in NumPy 2 (``200 - np.int8(100)``)."""
    common = common or _narrowest(_widest(value))
    if isinstance(value, (int, np.signedinteger)) and not isinstance(value, (bool, np.bool_)):
        own = _narrowest(_widest(value))
        return own(value) if np.iinfo(own).max < np.iinfo(common).max else int(value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "i" and value.size:
        return value.astype(_narrowest(_widest(value)))
    if isinstance(value, list) and value and all(type(v) is int for v in value):
        return [_narrowest(_widest(v))(v) for v in value]  # an index list of numpy ints, each its own dtype
    if isinstance(value, (list, tuple)):
        return type(value)(_retyped_each(v, common) for v in value)
    if isinstance(value, dict):
        return {k: _retyped_each(v, common) for k, v in value.items()}
    return value


def _float32(value):
    """``value`` with each float64 array cast to float32, or None when it has none."""
    return _changed(value, lambda v: v.astype(np.float32) if isinstance(v, np.ndarray) and v.dtype == np.float64
                    else v)


def _retyped(value, dtype, lists=np.array):
    """``value`` with each int a numpy scalar of ``dtype`` and each signed int array cast to it; an index list of
    ints becomes ``lists`` of them (an array by default: the contract takes one as an array too; ``list``
    keeps the container, a list of numpy integers)."""
    if isinstance(value, (int, np.signedinteger)) and not isinstance(value, (bool, np.bool_)):
        return dtype(value)
    if isinstance(value, np.ndarray) and value.dtype.kind == "i":
        return value.astype(dtype)
    if isinstance(value, list) and value and all(type(v) is int for v in value):
        return lists([dtype(v) for v in value])
    if isinstance(value, (list, tuple)):
        return type(value)(_retyped(v, dtype, lists) for v in value)
    if isinstance(value, dict):
        return {k: _retyped(v, dtype, lists) for k, v in value.items()}
    return value


GENERAL_CHECKS = (check_leaves_arguments_unchanged, check_results_belong_to_the_caller,
                  check_same_answer_in_any_order, check_refuses_in_any_order, check_answers_arrays_as_they_are_now,
                  check_read_only_arguments, check_any_signed_integer_type, check_arguments_bound_either_way)
