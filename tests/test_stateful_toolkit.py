"""grader.stateful: the first failing sequence, shrunk within a fixed number of replays."""
import numpy as np

from grader.stateful import Op, describe_ops, first_failure, shrink


def _buggy_cache(ops):
    """A toy cache whose bug needs add(3), then two appends to 3: the shortest failing sequence is 3 long."""
    alive, appended = set(), {}
    for op in ops:
        if op.name == "add":
            alive.add(op.args[0])
            appended[op.args[0]] = 0
        elif op.name == "append" and op.args[0] in alive:
            appended[op.args[0]] += 1
            if op.args[0] == 3 and appended[3] == 2:
                return f"wrong after {op}"
        elif op.name == "free":
            alive.discard(op.args[0])
    return None


def _sequences(seed, count=30, length=40):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield [Op(str(rng.choice(["add", "append", "free"])), (int(rng.integers(0, 5)),)) for _ in range(length)]


def test_a_failing_sequence_is_shrunk_to_the_operations_that_matter():
    found = first_failure(_sequences(0), _buggy_cache)
    assert found is not None
    ops, failure = found
    assert _buggy_cache(ops) == failure
    assert [str(op) for op in ops] == ["add(3)", "append(3)", "append(3)"]


def test_the_same_seed_gives_the_same_case_and_shrinking_is_bounded():
    runs = []

    def counted(ops):
        runs.append(len(ops))
        return _buggy_cache(ops)

    first = first_failure(_sequences(1), counted, replays=10)
    before = len(runs)
    assert first_failure(_sequences(1), counted, replays=10) == first
    failing_draw = next(i for i, n in enumerate(runs) if _buggy_cache(list(_sequences(1))[i]) is not None)
    assert before - (failing_draw + 1) <= 10  # the shrink spent at most its replays


def test_nothing_failing_gives_none_and_a_lone_operation_is_kept():
    assert first_failure(_sequences(2), lambda ops: None) is None
    assert shrink([Op("x")], "boom", lambda ops: "boom" if ops else None) == ([Op("x")], "boom")


def test_a_long_sequence_is_shown_by_its_ends():
    ops = [Op("append", (i,)) for i in range(30)]
    line = describe_ops(ops, limit=8)
    assert line.startswith("append(0); append(1); ... 23 more; ") and line.endswith("append(29)")
    assert str(Op("append", (1,), shown="1, 3 tokens")) == "append(1, 3 tokens)"
