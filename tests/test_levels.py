"""Levels an interviewer can trust: the rule (judge), the rubric model, interview sets, blame,
provisional strong_hire, and what every format says about them."""
import shutil
from pathlib import Path

import pytest

from grader import batch, catalog, engine, notes as notes_module, rubric
from grader.catalog import CatalogError, Exercise
from grader.engine import ExerciseFacts, build_result
from grader.notes import Notes
from grader.render import html, markdown, terminal
from grader.result import CheckResult, Diagnosis, Result
from grader.rubric import RubricError, judge

SOLUTIONS = catalog.KIT_ROOT / "solutions"
RING = SOLUTIONS / "ring_buffer_window.py"


# ---------------------------------------------------------------------------- judge, by hand

def small_rubric(**extra) -> rubric.Rubric:
    data = {
        "title": "t", "summary": "s", "levels": {"weak": "w", "hire": "h", "strong_hire": "sh"},
        "criteria": [
            {"id": "right", "level": "hire", "text": "right", "checks": ["values", "edges"]},
            {"id": "validates", "level": "strong_hire", "kind": "hygiene", "text": "v", "checks": ["rejects"]},
            {"id": "explains", "level": "strong_hire", "observe": "explains it"},
            {"id": "names", "level": "strong_hire", "observe": "names it"},
        ],
        "diagnoses": [{"id": "classic", "caps": "weak", "explain": "e"},
                      {"id": "lenient", "caps": "hire", "explain": "e"}],
        "follow_ups": [{"ask": "a", "listen_for": "l"}],
        "hints": [{"text": "nudge", "caps": "strong_hire"}, {"text": "answer", "caps": "weak"}],
    }
    data.update(extra)
    return rubric.parse(data)


def checks(**failing) -> list[CheckResult]:
    """Every check of small_rubric, passing unless named: ``checks(values="nan")``."""
    return [CheckResult(c, c not in failing, kind=failing.get(c) or None)
            for c in ("values", "edges", "rejects")]


def test_all_passed_with_observations_pending_is_provisional_strong_hire():
    j = judge(small_rubric(), checks(), [], {})
    assert (j.level, j.provisional, j.to_observe) == ("strong_hire", True, ["explains", "names"])
    assert "provisional: 2 observations to record" in j.reason
    assert j.to_raise == "to confirm strong hire, observe explains, names"


def test_observations_recorded_confirm_or_lower():
    assert judge(small_rubric(), checks(), [], {"explains": True, "names": True}).provisional is False
    lowered = judge(small_rubric(), checks(), [], {"explains": True, "names": False})
    assert (lowered.level, lowered.provisional) == ("hire", False)


@pytest.mark.parametrize("kind", ["wrong", "nan", "crash", "corrupt", "must_not"])
def test_a_weak_class_failure_is_weak_even_in_a_strong_hire_check(kind):
    assert judge(small_rubric(), checks(rejects=kind), [], {}).level == "weak"


def test_a_failure_without_a_kind_counts_as_wrong():
    j = judge(small_rubric(), checks(edges=None), [], {})
    assert j.level == "weak" and "edges (wrong)" in j.reason


def test_hygiene_alone_caps_at_hire_and_gets_its_own_line():
    j = judge(small_rubric(), checks(rejects="hygiene"), [], {})
    assert j.level == "hire" and not j.provisional  # observations above the level do not matter
    assert j.hygiene == "correct and efficient; hygiene missing: rejects"
    assert j.to_raise == "to reach strong hire: pass rejects"


def test_a_hire_criterion_missed_only_through_hygiene_caps_at_hire():
    j = judge(small_rubric(), checks(edges="hygiene"), [], {})
    assert j.level == "hire" and "edges (hygiene)" in j.reason
    not_run = [c for c in checks() if c.id != "edges"]  # no evidence is no credit
    assert judge(small_rubric(), not_run, [], {}).level == "weak"


def test_the_reason_names_what_caps_and_counts_missed_criteria():
    j = judge(small_rubric(), checks(values="wrong"), [Diagnosis("classic", "row 0 sees 1 key")], {})
    assert j.reason == "weak: classic (caps at weak), values (wrong); 1 criterion for hire missed"
    assert j.to_raise == "to reach hire: fix classic, pass values"
    assert j.hygiene.startswith("not correct")


def test_diagnosis_caps_come_from_the_rubric_not_the_diagnosis():
    lenient = Diagnosis("lenient", "accepted T = 0", caps="weak")  # what it carries is ignored
    assert judge(small_rubric(), checks(), [lenient], {}).level == "hire"
    assert judge(small_rubric(), checks(), [Diagnosis("unheard_of", "x")], {}).level == "weak"


def test_hints_cap_at_their_rubric_cap():
    assert judge(small_rubric(), checks(), [], {}, hints=[0]).level == "strong_hire"
    assert judge(small_rubric(), checks(), [], {}, hints=[1]).level == "weak"
    with pytest.raises(ValueError, match="hint 3 is not in the rubric"):
        judge(small_rubric(), checks(), [], {}, hints=[2])


def test_an_observed_hire_criterion_recorded_false_is_weak_and_unrecorded_is_provisional_hire():
    crits = [{"id": "right", "level": "hire", "text": "r", "checks": ["values", "edges", "rejects"]},
             {"id": "talks", "level": "hire", "observe": "talks it through"}]
    r = small_rubric(criteria=crits)
    assert judge(r, checks(), [], {"talks": False}).level == "weak"
    pending = judge(r, checks(), [], {})
    assert (pending.level, pending.provisional, pending.to_observe) == ("strong_hire", True, ["talks"])


def test_a_hint_the_rubric_does_not_offer_is_refused_when_notes_load(tmp_path):
    path = tmp_path / "notes.toml"
    offered = len(catalog.get("decode_mask").rubric.hints)
    path.write_text(f"[decode_mask]\nhints = [{offered + 1}]\n")
    with pytest.raises(notes_module.NotesError, match=f"its rubric has {offered} hint"):
        Notes.load(path)


# ---------------------------------------------------------------------------- the rubric model

@pytest.mark.parametrize("change,message", [
    ({"title": ""}, "title should be a non-empty string"),
    ({"levels": {"weak": "w", "hire": "h"}}, "[levels] needs exactly"),
    ({"criteria": [{"id": "x", "level": "weak", "text": "t", "checks": ["a"]}]}, "level 'weak'"),
    ({"criteria": [{"id": "x", "level": "hire", "text": "t", "checks": ["a"], "observe": "o"}]},
     "exactly one of checks / observe"),
    ({"criteria": [{"id": "x", "level": "strong_hire", "text": "t", "checks": ["a"], "kind": "wrong"}]},
     "kind 'wrong' is not one of"),
    ({"own_tests": {"classic": "nope", "scored": [], "strong_hire_score": 0.8}}, "'nope', which is not"),
    ({"own_tests": {"classic": "classic", "scored": [], "strong_hire_score": 80}}, "strong_hire_score"),
    ({"hints": [{"text": "t", "caps": "great"}]}, "caps 'great'"),
])
def test_a_bad_rubric_is_refused_with_the_field_named(change, message):
    with pytest.raises(RubricError, match=message.replace("[", r"\[").replace("(", r"\(")):
        small_rubric(**change)


def test_the_catalog_names_the_rubric_file_that_is_wrong(tmp_path, monkeypatch):
    bad = tmp_path / "decode_mask.toml"
    bad.write_text('title = "only a title"\n')
    monkeypatch.setattr(Exercise, "rubric_path", property(lambda self: bad))
    with pytest.raises(CatalogError, match=f"rubric {bad}: has no summary"):
        Exercise("decode_mask", tmp_path).rubric


def test_every_kit_rubric_follows_the_calibration():
    for ex in catalog.exercises():
        assert rubric.structure_problems(ex.rubric, ex.check_ids) == [], ex.id
    assert {d.id for d in catalog.get("decode_mask").rubric.diagnoses if d.contract} == {
        "top_left_alignment", "t1_only_tests"}


def test_structure_problems_are_found():
    r = small_rubric(criteria=[{"id": "v", "level": "strong_hire", "text": "t", "checks": ["rejects", "ghost"]}],
                     diagnoses=[{"id": "classic", "caps": "hire", "contract": True}])
    assert rubric.structure_problems(r, {"rejects", "stray"}) == [
        "criterion v names unknown check ghost",
        "check stray sits under no criterion",
        "strong_hire criterion v declares no kind (one of tests, efficiency, hygiene)",
        "diagnosis classic is the contract's, so it caps at weak, not hire"]


# ---------------------------------------------------------------------------- one pure step

def test_a_broken_check_is_the_kits_only_when_the_reference_breaks_too():
    ex = catalog.get("decode_mask")
    broken = [CheckResult("plain_decode", False, message="unexpected error while checking: TypeError: x")]
    facts = ExerciseFacts(Path("decode_mask.py"), checks=broken, unexpected=["plain_decode: TypeError: x"])
    mine = build_result(ex, facts, required=False)
    assert (mine.status, mine.level, mine.kit_error) == ("error", "weak", False)
    facts.reference_shows_unexpected = True
    kits = build_result(ex, facts, required=False)
    assert (kits.status, kits.level, kits.kit_error) == ("error", None, True)
    beside = build_result(ex, ExerciseFacts(Path("x.py"), checks=[CheckResult("plain_decode", True)]), False)
    assert Result(0, "s", [beside, kits]).overall_level is None  # no verdict, never a higher one


def test_not_attempted_counts_only_when_required():
    ex = catalog.get("decode_mask")
    stub = ExerciseFacts(Path("decode_mask.py"), attempted=False)
    assert build_result(ex, stub, required=False).level is None
    assert build_result(ex, stub, required=True).level == "weak"


# ---------------------------------------------------------------------------- real submissions

def folder(root: Path, **modules: Path | str) -> Path:
    """A submission: each exercise id maps to a file to copy or to source text."""
    root.mkdir(parents=True, exist_ok=True)
    for eid, source in modules.items():
        target = root / f"{eid}.py"
        shutil.copyfile(source, target) if isinstance(source, Path) else target.write_text(source)
    return root


def reference(eid: str) -> Path:
    return SOLUTIONS / f"{eid}.py"


OWN_TESTS = {"test_decode_mask": SOLUTIONS / "test_decode_mask.py"}  # decode_mask asks for tests


def ring_variant(old: str, new: str) -> str:
    source = RING.read_text()
    assert old in source
    return source.replace(old, new)


SET = ["decode_mask", "tile_classification", "tree_mask"]


@pytest.mark.slow
def test_one_of_three_done_with_e_is_weak_and_ranks_below_three_attempted(tmp_path):
    only_one = folder(tmp_path / "only_one", decode_mask=reference("decode_mask"), **OWN_TESTS)
    sloppy_tree = SOLUTIONS / "mutants" / "tree_mask" / "no_validation.py"  # right, accepts bad parents
    all_three = folder(tmp_path / "all_three", decode_mask=reference("decode_mask"), **OWN_TESTS,
                       tile_classification=reference("tile_classification"), tree_mask=sloppy_tree)
    (tmp_path / "out").mkdir()  # grade_one writes into OUT/<name>; grade_many makes OUT
    rows = [batch.grade_one(str(p), str(tmp_path / "out" / p.name), p.name, SET, 0, "detail")
            for p in (only_one, all_three)]
    by_name = {r["name"]: r for r in rows}
    assert by_name["only_one"]["level"] == "weak"
    assert by_name["only_one"]["exercises"]["tree_mask"] == {
        "level": "weak", "status": "not_attempted", "provisional": False, "required": True, "checks": ""}
    assert by_name["all_three"]["level"] == "hire"
    assert [r["name"] for r in sorted(rows, key=batch.ranking)] == ["all_three", "only_one"]
    report = (tmp_path / "out" / "only_one" / "report.md").read_text()
    assert "| not attempted (required: counts as weak) |" in report


@pytest.mark.slow  # whole gradings: the full suite runs it, the fast loop stays under a minute
def test_without_e_an_exercise_not_attempted_is_listed_and_not_counted(tmp_path):
    result = engine.grade(folder(tmp_path / "s", decode_mask=reference("decode_mask")), seed=0,
                          only_checks={"plain_decode", "prefill"})
    others = [e for e in result.exercises if e.id != "decode_mask"]
    assert others and all(e.status == "not_attempted" and not e.counted for e in others)
    assert [e.id for e in result.counted] == ["decode_mask"]


@pytest.mark.slow
def test_a_syntax_error_beside_a_correct_exercise_is_weak_overall(tmp_path):
    root = folder(tmp_path / "s", decode_mask=reference("decode_mask"), **OWN_TESTS,
                  tree_mask="def tree_positions(:\n")
    result = engine.grade(root, seed=0)
    assert result.exercise("decode_mask").level == "strong_hire"
    assert result.exercise("tree_mask").status == "error" and result.overall_level == "weak"
    assert result.score == 0.5  # the broken exercise counts, with nothing passed


@pytest.mark.slow
def test_the_reference_is_provisional_without_notes_confirmed_with_them_hire_with_one_no(tmp_path):
    observed = [c.id for c in catalog.get("decode_mask").rubric.criteria if c.observed]
    plain = engine.grade(SOLUTIONS, ["decode_mask"], seed=0)
    ex = plain.exercise("decode_mask")
    assert (ex.level, ex.provisional, ex.to_observe) == ("strong_hire", True, observed)
    assert plain.to_dict()["overall"]["provisional"] is True

    def with_notes(values: dict) -> Result:
        path = tmp_path / "notes.toml"
        path.write_text("[decode_mask.observed]\n" + "".join(f"{k} = {str(v).lower()}\n" for k, v in values.items()))
        return engine.grade(SOLUTIONS, ["decode_mask"], notes=Notes.load(path), seed=0)

    confirmed = with_notes(dict.fromkeys(observed, True))
    assert (confirmed.overall_level, confirmed.overall_provisional) == ("strong_hire", False)
    one_no = with_notes({**dict.fromkeys(observed, True), observed[0]: False})
    assert (one_no.overall_level, one_no.overall_provisional) == ("hire", False)
    assert "hire: 1 criterion for strong hire missed" == one_no.exercise("decode_mask").reason

    reapplied = notes_module.apply(plain, Notes({"decode_mask": {"observed": {observed[0]: False}}}))
    assert reapplied.exercise("decode_mask").level == "hire"  # the same rule, from saved checks


@pytest.mark.parametrize("what,old,new", [
    ("NaN rows", "    cache.append(k, v)\n    return out",
     "    if len(q) > cache.capacity:\n        out[: len(q) - cache.capacity] = np.nan\n"
     "    cache.append(k, v)\n    return out"),
    ("a corrupted cache", "kept = slice(max(0, len(k) - self.capacity), len(k))",
     "kept = slice(0, min(len(k), self.capacity))"),
])
@pytest.mark.slow
def test_nan_rows_or_a_corrupted_cache_after_a_chunk_longer_than_the_ring_are_weak(tmp_path, what, old, new):
    root = folder(tmp_path / "s", ring_buffer_window=ring_variant(old, new))
    ex = engine.grade(root, ["ring_buffer_window"], seed=0).exercise("ring_buffer_window")
    assert ex.level == "weak", (what, ex.reason)
    assert "for hire missed" in ex.reason


@pytest.mark.slow
def test_a_reply_that_breaks_the_grader_is_the_candidates_fault(tmp_path):
    lying_len = RING.read_text() + (
        "\nimport builtins\n_real_len = builtins.len\n"
        "builtins.len = lambda x: str(_real_len(x)) if type(x).__name__ == 'RingKVCache' else _real_len(x)\n")
    root = folder(tmp_path / "s", ring_buffer_window=lying_len, decode_mask=reference("decode_mask"), **OWN_TESTS)
    result = engine.grade(root, ["decode_mask", "ring_buffer_window"], seed=0)
    ring = result.exercise("ring_buffer_window")
    assert ring.level == "weak" and not ring.kit_error
    assert result.overall_level == "weak"


# ---------------------------------------------------------------------------- every format says it

@pytest.mark.slow
def test_every_format_shows_provisional_and_why(top_left_example):
    result = engine.grade(top_left_example, ["decode_mask"], seed=0)
    ex = result.exercise("decode_mask")
    assert ex.reason.startswith("weak: ") and "top_left_alignment (caps at weak)" in ex.reason
    assert ex.to_raise.startswith("to reach hire: fix top_left_alignment")
    for text in (terminal.summary(result), markdown.render(result), html.render(result)):
        assert ex.reason in text and ex.to_raise in text
    full = engine.grade(SOLUTIONS, ["decode_mask"], seed=0)
    phrase = "strong hire (provisional: 3 observations)"
    for text in (terminal.summary(full), markdown.render(full), html.render(full)):
        assert phrase in text and "correct and efficient; hygiene clean" in text
