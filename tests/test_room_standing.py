"""The level the interviewer's page shows as it stands: after the end, the final grading's, which the
reports hold, never the last submission's (red team 13: a reference submitted, a mistake saved unsubmitted,
then the end; the page said strong_hire while result.json said weak)."""
import pytest

from grader import api
from grader.room import finish, views
from grader.room.session import Room
from grader.room.store import now

from .test_attacks_evidence import SOLUTIONS

pytestmark = pytest.mark.slow


def _graded(folder) -> dict:
    return api.grade(folder, ["tree_mask"], seed=7, live=True).to_dict()


def test_after_the_end_the_standing_level_is_the_final_gradings(tmp_path):
    right = _graded(SOLUTIONS)
    wrong_folder = tmp_path / "wrong"
    wrong_folder.mkdir()
    (wrong_folder / "tree_mask.py").write_bytes((SOLUTIONS / "mutants" / "tree_mask" / "triangle.py").read_bytes())
    wrong = _graded(wrong_folder)
    room = Room(tmp_path / "session", ["tree_mask"], None, None)
    try:
        for kind, outcome in (("submit", right), ("final", wrong)):
            if kind == "final":
                room.store.set_meta(ended=now())  # as the end does, without its own grading of the stubs
            run = room.store.start_run(kind, "tree_mask", 7)
            room.store.finish_run(run, "done", outcome)
            shown = views.interviewer(room)
            assert shown["overall"] == finish.standing(room).overall_level
            if kind == "submit":
                assert shown["overall"] == "strong_hire" and shown["exercises"][0]["level"] == "strong_hire"
        assert shown["overall"] == "weak" and shown["exercises"][0]["level"] == "weak"
        assert finish.final_result(room, wrong).overall_level == "weak"  # what result.json says
    finally:
        room.close()


def test_with_two_exercises_the_final_grading_is_listed_under_each_with_its_own_part(tmp_path):
    ids = ["decode_mask", "tree_mask"]
    final = api.grade(SOLUTIONS, ids, seed=7, live=True).to_dict()
    room = Room(tmp_path / "session", ids, None, None)
    try:
        room.store.set_meta(ended=now())
        room.store.finish_run(room.store.start_run("final", ",".join(ids), 7), "done", final)
        shown = views.interviewer(room)
        for section in shown["exercises"]:
            runs = [r for r in section["runs"] if r["kind"] == "final"]
            assert len(runs) == 1, f"{section['id']} lists {len(runs)} final gradings"
            assert [e["id"] for e in runs[0]["exercises"]] == [section["id"]]
            assert runs[0]["exercises"][0]["level"] == section["level"] == "strong_hire"
        assert [e["id"] for e in shown["final"]["exercises"]] == ids  # the page's own line covers both
    finally:
        room.close()
