"""Calls bound as the contract's signature allows: each candidate call of a check goes out bound a way
drawn from the seed (as written, arguments by name in a drawn order, a positional prefix and the rest by
name, optional arguments equal to their default left out).

Section 1 fixes the signatures, not how a caller spells a call. A check that always passed ``window``
by position, or always spelled out ``window=None``, let an answer that reads the window only by position,
or defaults it to 4096, pass every check (red team 27). Drawing the binding of every call (functions
taking a cache or a lent buffer included, which the general rule's replays leave alone) puts each
argument's other spellings in front of every check. A call the answer refuses with Python's own
binding TypeError (a renamed parameter) is sent again as written and judged on its values; the refusal
is a hygiene slip that ``arguments_bound_either_way`` reports.

Signatures are read from the exercise's stub, never run: a module function, a class's ``__init__``
(its constructor), or a method that exactly one of the stub's classes defines.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path


REQUIRED, UNKNOWN = object(), object()

AS_WRITTEN, BY_NAME = 0.5, 0.75  # cumulative shares of calls sent as written, then by name; the rest, prefix + names
LEAVE_OUT = 0.5  # chance that an optional argument equal to its default is left out


@functools.cache
def _stub_body(stub: Path) -> tuple:
    """The stub's top-level statements, parsed once per stub, never run."""
    return tuple(ast.parse(stub.read_text()).body)


def stub_definition(stub: Path, name: str) -> ast.stmt | None:
    """The stub's module-level definition of ``name`` (a function or class)."""
    return next((node for node in _stub_body(stub) if getattr(node, "name", None) == name), None)


@functools.cache
def signature(stub: Path, name: str) -> tuple | None:
    """The stub's module-level function ``name``'s parameters as (name, kind, default): kind "positional"
    (before /), "either" or "keyword" (after *); the default a literal, or ``REQUIRED``. None for a class or a
    signature with *args or **kwargs, or a default that is not a literal."""
    return _parameters(stub_definition(stub, name))


@functools.cache
def call_signature(stub: Path, name: str, method: bool) -> tuple | None:
    """The parameters a call of ``name`` binds to: a module function's, or a class's constructor's
    (``method`` False); a method's (``method`` True) when exactly one stub class defines it; ``self`` left out."""
    found = stub_definition(stub, name) if not method else None
    if isinstance(found, ast.ClassDef):
        return _method_parameters(found, "__init__")
    if not method:
        return _parameters(found)
    classes = [node for node in _stub_body(stub) if isinstance(node, ast.ClassDef)]
    owners = [c for c in classes if any(isinstance(f, ast.FunctionDef) and f.name == name for f in c.body)]
    return _method_parameters(owners[0], name) if len(owners) == 1 else None


def _method_parameters(cls: ast.ClassDef, name: str) -> tuple | None:
    found = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == name), None)
    if found is None or found.decorator_list or not (found.args.posonlyargs or found.args.args):
        return None  # a static or class method, or none: left as written
    params = _parameters(found)
    return params[1:] if params else None


def _parameters(found) -> tuple | None:
    if not isinstance(found, ast.FunctionDef) or found.args.vararg or found.args.kwarg:
        return None
    a = found.args
    either = [*a.posonlyargs, *a.args]
    defaults = [REQUIRED] * (len(either) - len(a.defaults)) + [_literal(d) for d in a.defaults]
    out = [(p.arg, "positional" if i < len(a.posonlyargs) else "either", d)
           for i, (p, d) in enumerate(zip(either, defaults))]
    out += [(p.arg, "keyword", REQUIRED if d is None else _literal(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return None if UNKNOWN in [d for *_, d in out] else tuple(out)


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return UNKNOWN


def given(params, args, kwargs) -> dict | None:
    """{parameter: value} of a call, or None when it does not bind to ``params`` (a call a check makes to see
    it refused is left as written)."""
    positional = [n for n, kind, _ in params if kind != "keyword"]
    if len(args) > len(positional):
        return None
    out = dict(zip(positional, args))
    kinds = {n: kind for n, kind, _ in params}
    if any(n in out or kinds.get(n, "positional") == "positional" for n in kwargs):
        return None
    out |= kwargs
    if any(d is REQUIRED and n not in out for n, _, d in params):
        return None
    return out


def is_default(value, default) -> bool:
    """``value`` is the literal ``default`` itself (same type, same value): leaving it out changes nothing."""
    return default is not REQUIRED and type(value) is type(default) and value == default


def drawn(params, args, kwargs, rng) -> tuple[list, dict, str] | None:
    """The call bound a way drawn from ``rng``: (args, kwargs, how said), or None to send it as written."""
    values = given(params, args, kwargs)
    if values is None:
        return None
    names = [n for n, kind, _ in params if kind != "keyword"]
    r = rng.random()
    if r < AS_WRITTEN:
        first_named = len(args)
    else:  # positional-only parameters stay positional; a drawn number of the others follow them
        start = next((i for i, (_, kind, _) in enumerate(params) if kind == "either"), len(names))
        last = max((i for i, n in enumerate(names) if n in values), default=-1) + 1
        first_named = min(start, last) if r < BY_NAME else int(rng.integers(min(start, last), last + 1))
    first_named = min(first_named, next((i for i, n in enumerate(names) if n not in values), len(names)))
    positional = [values[n] for n in names[:first_named]]
    defaults = {n: d for n, _, d in params}
    rest = [n for n in (kwargs if r < AS_WRITTEN else values) if n not in names[:first_named]]
    left_out = [n for n in rest if is_default(values[n], defaults[n]) and rng.random() < LEAVE_OUT]
    rest = [n for n in rest if n not in left_out]
    if r >= AS_WRITTEN:
        rest = rng.permutation(rest).tolist() if rest else []
    keywords = {n: values[n] for n in rest}
    if len(positional) == len(args) and list(keywords) == list(kwargs):
        return None
    return positional, keywords, _said(keywords, kwargs, left_out, defaults)


def _said(keywords, kwargs, left_out, defaults) -> str:
    parts = []
    moved = [n for n in keywords if n not in kwargs]
    if moved:
        parts.append(f"{', '.join(moved)} by name")
    parts += [f"{n} left out (its default {defaults[n]!r})" for n in left_out]
    return "sent with " + "; ".join(parts) if parts else "sent with its keywords in another order"
