"""Every candidate call goes out bound a way drawn from the seed (``grader/checking/binding.py``): Python's own
binder is the oracle that each drawn binding is the same call, and real gradings show that an answer reading
an argument only by position, or with another default, now fails the exercise's own checks, while one that
renamed a parameter is a hygiene slip."""
import ast
import inspect
import sys

import numpy as np
import pytest

from grader import catalog, engine
from grader.checking import binding
from grader.sandbox.errors import refused_binding

SOLUTIONS = catalog.KIT_ROOT / "solutions"


def _stub_callables(ex):
    """(where, name, the stub's callable) for every module function, class (its constructor) and method that a
    call in a check can reach, the stub executed with its helper files importable."""
    sys.path.insert(0, str(ex.stub_path.parent))
    try:
        namespace: dict = {}
        exec(compile(ex.stub_path.read_text(), str(ex.stub_path), "exec"), namespace)  # the kit's own stub
    finally:
        sys.path.remove(str(ex.stub_path.parent))
    for node in ast.parse(ex.stub_path.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            yield "module", node.name, namespace[node.name]
        elif isinstance(node, ast.ClassDef):
            cls = namespace[node.name]
            yield "module", node.name, cls
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and not f.name.startswith("_"):
                    yield "method", f.name, getattr(cls, f.name)


def _a_call(signature, rng):
    """Arguments that bind to ``signature``: each required one a fresh object, each optional one left out, given
    as its default itself, or given another value; by position or by name as its kind allows."""
    args, kwargs, by_position = [], {}, True
    for p in signature.parameters.values():
        if p.name == "self":
            continue
        if p.default is not p.empty:
            r = rng.random()
            if r < 0.3:
                by_position = False  # left out: whatever follows goes by name
                continue
            value = p.default if r < 0.7 else object()
        else:
            value = object()
        if p.kind is p.POSITIONAL_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and by_position and rng.random() < 0.7):
            args.append(value)
        else:
            by_position = p.kind is p.POSITIONAL_ONLY
            kwargs[p.name] = value
    return args, kwargs


@pytest.mark.parametrize("ex", catalog.exercises(), ids=lambda e: e.id)
def test_every_drawn_binding_is_the_same_call_to_python(ex):
    """For every callable of the stub a check can call, random calls and 30 draws each: a drawn binding binds,
    by Python's own binder, to exactly the arguments of the call as written (defaults applied); across the
    draws some arguments go by name, and an argument given as its default is sometimes left out."""
    rng = np.random.default_rng(27)
    moved = left_out = literal_defaults = 0
    for where, name, fn in _stub_callables(ex):
        params = binding.call_signature(ex.stub_path, name, where == "method")
        signature = inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)
        if params is None:  # left as written: only *args / **kwargs, or a method several classes define
            assert where == "method" or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                                            for p in signature.parameters.values()), name
            continue
        literal_defaults += any(d is not binding.REQUIRED for *_, d in params)
        self = [None] if "self" in signature.parameters else []
        for _ in range(10):
            args, kwargs = _a_call(signature, rng)
            want = signature.bind(*self, *args, **kwargs)
            want.apply_defaults()
            for draw in range(30):
                bound = binding.drawn(params, args, kwargs, np.random.default_rng([27, draw]))
                if bound is None:
                    continue
                new_args, new_kwargs, how = bound
                got = signature.bind(*self, *new_args, **new_kwargs)
                got.apply_defaults()
                assert set(got.arguments) == set(want.arguments), (name, how)
                assert all(got.arguments[n] is want.arguments[n] or got.arguments[n] == want.arguments[n]
                           for n in want.arguments), (name, how)
                moved += "by name" in how
                left_out += "left out" in how
    assert moved
    assert left_out or not literal_defaults, "an argument given as its literal default is sometimes left out"


def test_a_call_that_does_not_bind_is_sent_as_written():
    """A check that passes too many arguments, an unknown name or a name twice, to see it refused, is left alone."""
    params = binding.call_signature(catalog.get("ring_buffer_window").stub_path, "windowed_attention_step", False)
    for args, kwargs in (([1, 2, 3, 4, 5, 6], {}), ([1, 2, 3, 4], {"windows": 5}), ([1, 2, 3, 4, 5], {"window": 5}),
                         ([1, 2, 3], {})):
        assert all(binding.drawn(params, args, kwargs, np.random.default_rng(s)) is None for s in range(20))


def test_python_binding_errors_are_told_from_an_answer_s_own_type_error():
    def f(a, b=1):
        return a + b
    messages = []
    for call in (lambda: f(1, c=2), lambda: f(), lambda: f(1, 2, 3), lambda: f(1, a=2)):
        try:
            call()
        except TypeError as exc:
            messages.append(str(exc))
    assert len(messages) == 4 and all(refused_binding(m) for m in messages)
    assert not refused_binding("unsupported operand type(s) for +: 'int' and 'str'")


WINDOW_BY_POSITION_ONLY = '''

_step = windowed_attention_step


def windowed_attention_step(cache, q, k, v, *args, **kwargs):  # a window given by name is dropped
    return _step(cache, q, k, v, args[0] if args else cache.capacity)
'''

WINDOW_RENAMED = '''

_step = windowed_attention_step


def windowed_attention_step(cache, q, k, v, w):  # the window is right, under another name
    return _step(cache, q, k, v, w)
'''


@pytest.mark.slow
@pytest.mark.parametrize("tail, level", [(WINDOW_BY_POSITION_ONLY, "weak"), (WINDOW_RENAMED, "hire")])
def test_an_argument_read_only_by_position_is_wrong_and_a_renamed_one_a_slip(submission, tail, level):
    """The window read only by position gives wrong values in the exercise's own checks; under another name
    it gives right values, every check passes as written, and arguments_bound_either_way reports the refusal."""
    source = (SOLUTIONS / "ring_buffer_window.py").read_text() + tail
    result = engine.grade(submission({"ring_buffer_window.py": source}), ["ring_buffer_window"], seed=7)
    ex = result.exercise("ring_buffer_window")
    failing = {c.id: c for c in ex.checks if not c.passed}
    assert ex.level == level, (ex.level, {k: c.message[:200] for k, c in failing.items()})
    if level == "hire":
        assert set(failing) == {"arguments_bound_either_way"} and failing["arguments_bound_either_way"].kind == \
            "hygiene" and "TypeError" in failing["arguments_bound_either_way"].message
    else:
        assert any(c.kind == "wrong" and "window" in c.message for c in failing.values())
